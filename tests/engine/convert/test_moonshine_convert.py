"""The Moonshine converter against transcribe.cpp: tiny and base from Moonshine's own PyPI packages
(ONNX Runtime files with 8-bit weights) must come out in transcribe.cpp's Moonshine layout key by key
and tensor by tensor, load and transcribe in transcribe.cpp, and a transformers checkpoint of the same
weights must give the same file."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from sayso.engine import reference
from sayso.engine.convert import convert
from sayso.engine.convert.moonshine import TIED_OUTPUT, read_vocabulary
from sayso.engine.convert.moonshine_ort import OrtGraph, read_parameters, read_tokenizer_bin
from sayso.engine.convert.moonshine_pypi import fetch_moonshine_ort
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.moonshine.tokenizer import Tokenizer

from support.data import AUDIO
from support.texts import JFK_WORDS, words

JFK = AUDIO / "jfk.wav"
SIZES = {"moonshine-tiny": (288, 6, 1152, 160), "moonshine-base": (416, 8, 1664, 210)}
"""variant -> (d_model, layers, ffn_dim, tensor count) of UsefulSensors' released models."""
NAMES = {"moonshine-tiny": ("Moonshine Tiny", "27M"), "moonshine-base": ("Moonshine Base", "62M")}
ROTARY_FACTORS = {"moonshine-tiny": 0.9, "moonshine-base": 0.62}  # both turn 32 dims of each head

EXPECTED_KEYS = [
    ("general.architecture", "STRING"), ("general.name", "STRING"), ("general.basename", "STRING"),
    ("general.size_label", "STRING"), ("general.author", "STRING"), ("general.organization", "STRING"),
    ("general.license", "STRING"), ("general.license.name", "STRING"), ("general.license.link", "STRING"),
    ("general.file_type", "UINT32"), ("general.languages", "ARRAY[STRING]"), ("stt.variant", "STRING"),
    ("stt.capability.lang_detect", "BOOL"), ("stt.capability.translate", "BOOL"),
    ("stt.capability.timestamps", "BOOL"), ("tokenizer.ggml.model", "STRING"), ("tokenizer.ggml.pre", "STRING"),
    ("tokenizer.ggml.byte_fallback", "BOOL"), ("tokenizer.ggml.unknown_token_id", "UINT32"),
    ("tokenizer.ggml.bos_token_id", "UINT32"), ("tokenizer.ggml.eos_token_id", "UINT32"),
    ("tokenizer.ggml.padding_token_id", "UINT32"), ("tokenizer.ggml.add_bos_token", "BOOL"),
    *[(f"stt.moonshine.{stack}.{key}", kind) for stack in ("encoder", "decoder") for key, kind in (
        ("n_layers", "UINT32"), ("d_model", "UINT32"), ("n_heads", "UINT32"), ("n_kv_heads", "UINT32"),
        ("ffn_dim", "UINT32"), ("activation", "STRING"))],
    ("stt.moonshine.decoder.vocab_size", "UINT32"), ("stt.moonshine.decoder.max_position_embeddings", "UINT32"),
    ("stt.moonshine.decoder.tie_word_embeddings", "BOOL"), ("stt.moonshine.partial_rotary_factor", "FLOAT32"),
    ("stt.moonshine.rope_theta", "FLOAT32"), ("stt.moonshine.attention_bias", "BOOL"),
    ("stt.moonshine.pad_head_dim_to_multiple_of", "UINT32"),
    ("stt.moonshine.conv_stem.channels", "ARRAY[INT32]"), ("stt.moonshine.conv_stem.kernel_sizes", "ARRAY[INT32]"),
    ("stt.moonshine.conv_stem.strides", "ARRAY[INT32]"), ("stt.moonshine.conv_stem.groupnorm_num_groups", "UINT32"),
    ("stt.moonshine.conv_stem.groupnorm_eps", "FLOAT32"), ("stt.moonshine.decoder_start_token_id", "UINT32"),
    ("stt.moonshine.bos_token_id", "UINT32"), ("stt.moonshine.eos_token_id", "UINT32"),
    ("stt.moonshine.pad_token_id", "UINT32"), ("stt.frontend.type", "STRING"),
    ("stt.frontend.sample_rate", "UINT32"), ("stt.frontend.num_mels", "UINT32"),
    ("tokenizer.ggml.tokens", "ARRAY[STRING]"), ("tokenizer.ggml.token_type", "ARRAY[INT32]"),
    ("tokenizer.ggml.merges", "ARRAY[STRING]"),
]  # fmt: skip
"""transcribe.cpp's scripts/convert-moonshine.py: every key in the order it writes them (the bulk
tokenizer arrays moved last by its gguf_writer), with the GGUF type its loader checks."""


@functools.cache
def opened(path: Path) -> ModelFile:
    return ModelFile(path)


# ---- transcribe.cpp's layout ---------------------------------------------------------------------


@pytest.mark.parametrize("variant", SIZES)
def test_keys_values_and_types_are_transcribe_cpps(variant, moonshine_q8):
    f = opened(moonshine_q8[variant])
    assert [(k, f.value_type(k)) for k in f.metadata] == EXPECTED_KEYS
    d, layers, ffn, _ = SIZES[variant]
    for stack in ("encoder", "decoder"):
        assert f.require(f"stt.moonshine.{stack}.n_layers") == layers
        assert f.require(f"stt.moonshine.{stack}.d_model") == d
        assert f.require(f"stt.moonshine.{stack}.n_heads") == f.require(f"stt.moonshine.{stack}.n_kv_heads") == 8
        assert f.require(f"stt.moonshine.{stack}.ffn_dim") == ffn
    assert f.require("stt.variant") == variant
    assert (f.require("general.name"), f.require("general.size_label")) == NAMES[variant]
    assert f.require("general.file_type") == 7
    assert f.require("tokenizer.ggml.model") == "bpe"
    assert f.require("stt.moonshine.partial_rotary_factor") == pytest.approx(ROTARY_FACTORS[variant])
    assert f.require("stt.moonshine.decoder.max_position_embeddings") == 194
    assert f.require("stt.moonshine.conv_stem.channels") == [d, 2 * d, d]
    assert f.require("stt.moonshine.conv_stem.kernel_sizes") == [127, 7, 3]
    assert f.require("stt.moonshine.conv_stem.strides") == [64, 3, 2]
    assert [f.require(f"stt.moonshine.{t}_token_id") for t in ("decoder_start", "bos", "eos", "pad")] == [1, 1, 2, 2]
    assert f.require("stt.frontend.type") == "raw" and f.require("stt.frontend.num_mels") == 1


@pytest.mark.parametrize("variant", SIZES)
def test_tensors_in_transcribe_cpps_order_shapes_and_types(variant, moonshine_q8):
    f = opened(moonshine_q8[variant])
    d, layers, ffn, count = SIZES[variant]
    assert len(f.names) == count
    enc = ["norm_attn.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.out.weight",
           "norm_ffn.weight", "ffn.fc1.weight", "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias"]
    dec = ["norm_self.weight", *(f"self_attn.{p}.weight" for p in "qkv"), "self_attn.out.weight",
           "norm_cross.weight", *(f"cross_attn.{p}.weight" for p in "qkv"), "cross_attn.out.weight",
           "norm_ffn.weight", "ffn.fc1.weight", "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias"]  # fmt: skip
    assert f.names == [
        "enc.conv.0.weight", "enc.conv.1.weight", "enc.conv.1.bias", "enc.conv.2.weight", "enc.conv.2.bias",
        "enc.conv.norm.weight", "enc.conv.norm.bias", "enc.final_norm.weight",
        *(f"enc.blocks.{i}.{n}" for i in range(layers) for n in enc),
        "dec.token_embd.weight", "dec.final_norm.weight",
        *(f"dec.blocks.{i}.{n}" for i in range(layers) for n in dec),
    ]  # fmt: skip
    assert f.tensor("enc.conv.0.weight").shape == (d, 1, 127)
    assert f.tensor("enc.conv.1.weight").shape == (2 * d, d, 7)
    assert f.tensor("dec.blocks.0.ffn.fc1.weight").shape == (2 * ffn, d)  # SwiGLU: value and gate
    assert f.tensor("dec.token_embd.weight").shape == (32768, d)
    for name in f.names:  # transcribe.cpp's Q8_0 preset: convs and norms F32, matrices Q8_0
        matrix = len(f.tensor(name).shape) == 2 and "norm" not in name
        assert f.tensor(name).ggml_type == ("Q8_0" if matrix else "F32"), name


@pytest.mark.parametrize("variant", SIZES)
def test_converted_file_transcribes_in_transcribe_cpp(variant, moonshine_q8):
    import transcribe_cpp

    pcm, rate = sf.read(JFK, dtype="float32")
    assert rate == 16000
    assert words(reference.transcribe(transcribe_cpp.Model(str(moonshine_q8[variant])), pcm).text) == JFK_WORDS


def test_f16_conversion(moonshine_ort, moonshine_q8, tmp_path):
    f16 = opened(convert(moonshine_ort["moonshine-tiny"], tmp_path / "tiny-f16.gguf", "f16"))
    ref = opened(moonshine_q8["moonshine-tiny"])
    assert f16.require("general.file_type") == 1
    assert {k: v for k, v in f16.metadata.items() if k != "general.file_type"} == {
        k: v for k, v in ref.metadata.items() if k != "general.file_type"}
    assert f16.tensor("enc.blocks.0.attn.q.weight").ggml_type == "F16"
    assert f16.tensor("enc.conv.1.weight").ggml_type == "F32"
    q8_values, f16_values = ref.array("dec.token_embd.weight"), f16.array("dec.token_embd.weight")
    assert np.abs(q8_values - f16_values).max() < 0.02  # both within a quantization step of the source


# ---- the ORT reader ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", SIZES)
def test_8bit_weights_are_dequantized_into_transformers_names(variant, moonshine_ort):
    """Every ORT weight lands under its transformers name; the quantized values take at most 256 levels
    per tensor (one scale, one zero point) and the tied output projection equals the embedding."""
    src = moonshine_ort[variant]
    decoder = read_parameters(OrtGraph(src / "decoder_model_merged.ort"), "model.decoder.")
    encoder = read_parameters(OrtGraph(src / "encoder_model.ort"), "model.encoder.")
    d, layers, ffn, count = SIZES[variant]
    assert len(encoder) + len(decoder) == count + 1  # + proj_out
    assert np.array_equal(decoder[TIED_OUTPUT], decoder["model.decoder.embed_tokens.weight"])
    q = decoder[f"model.decoder.layers.{layers - 1}.encoder_attn.q_proj.weight"]
    assert q.shape == (d, d) and len(np.unique(q)) <= 256
    assert decoder["model.decoder.layers.0.mlp.fc1.weight"].shape == (2 * ffn, d)
    assert encoder["model.encoder.layers.0.mlp.fc1.bias"].shape == (ffn,)
    assert encoder["model.encoder.groupnorm.weight"].shape == (d,)


def test_tokenizer_json_is_checked_against_the_models_tokenizer_bin(moonshine_ort, tmp_path):
    """tokenizer.bin lists the same pieces as tokenizer.json (bytes for <0xNN>, a few left empty);
    a tokenizer.json that disagrees is refused."""
    src = moonshine_ort["moonshine-tiny"]
    pieces = read_tokenizer_bin(src / "tokenizer.bin")
    vocabulary = read_vocabulary(src / "tokenizer.json", 32768)
    assert len(pieces) == 32768 and pieces[1] == b"<s>" and pieces[3 + 0x41] == b"A"
    assert vocabulary.tokens[3 + 0x41] == "<0x41>" and vocabulary.types[3 + 0x41] == 6
    assert vocabulary.types[:3] == [2, 3, 3] and vocabulary.tokens[32767] == "<<ST_767>>"
    assert vocabulary.merges[0] == "▁ t"

    wrong = tmp_path / "wrong"
    shutil.copytree(src, wrong)
    data = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    vocab["▁theXX"] = vocab.pop("▁the")
    (wrong / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ModelFileError, match="not this model's tokenizer"):
        convert(wrong, tmp_path / "wrong.gguf")


def test_our_decoding_equals_the_tokenizers_library(moonshine_ort, moonshine_q8):
    from tokenizers import Tokenizer as HfTokenizer

    reference = HfTokenizer.from_file(str(moonshine_ort["moonshine-tiny"] / "tokenizer.json"))
    ours = Tokenizer.from_model_file(opened(moonshine_q8["moonshine-tiny"]))
    text = "Café über 3 naïve ☃ snowmen, 東京; and so my fellow Americans."
    ids = reference.encode(text).ids
    assert any(3 <= i < 259 for i in ids)  # byte-fallback pieces among them
    assert ours.decode(ids) == reference.decode(ids) == text
    assert ours.decode([1, *ids, 2]) == text  # <s> and </s> carry no text


def test_convert_refuses_what_it_cannot_read(moonshine_ort, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(moonshine_ort["moonshine-tiny"], broken)
    (broken / "decoder_model_merged.ort").write_bytes(b"not a flatbuffer at all")
    with pytest.raises(ModelFileError, match="not an ONNX Runtime"):
        convert(broken, tmp_path / "broken.gguf")
    with pytest.raises(SaysoError, match="moonshine-tiny"):
        fetch_moonshine_ort("moonshine-huge", tmp_path / "huge")


# ---- a transformers checkpoint of the same weights ----------------------------------------------------


@pytest.fixture(scope="module")
def hf_tiny(moonshine_ort, tmp_path_factory) -> Path:
    """A transformers Moonshine tiny checkpoint built from the ORT weights: the state dict under
    MoonshineForConditionalGeneration's names, and transformers' own config.json."""
    from safetensors.numpy import save_file
    from transformers import GenerationConfig, MoonshineConfig

    src = moonshine_ort["moonshine-tiny"]
    out = tmp_path_factory.mktemp("hf-tiny")
    state = {**read_parameters(OrtGraph(src / "encoder_model.ort"), "model.encoder."),
             **read_parameters(OrtGraph(src / "decoder_model_merged.ort"), "model.decoder.")}  # fmt: skip
    save_file(state, out / "model.safetensors")
    MoonshineConfig(max_position_embeddings=194, pad_head_dim_to_multiple_of=8, pad_token_id=2).save_pretrained(out)
    GenerationConfig(bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, pad_token_id=2,
                     max_length=194).save_pretrained(out)  # fmt: skip
    shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
    return out


def test_hf_checkpoint_converts_to_the_same_file(hf_tiny, moonshine_q8, tmp_path):
    ours = opened(convert(hf_tiny, tmp_path / "from-hf.gguf", "q8_0"))
    ref = opened(moonshine_q8["moonshine-tiny"])
    assert ours.metadata == ref.metadata
    assert ours.names == ref.names
    for name in ref.names:
        assert np.array_equal(np.asarray(ours.tensor(name).data), np.asarray(ref.tensor(name).data)), name


def test_hf_checkpoint_with_unknown_weights_is_refused(hf_tiny, tmp_path):
    from safetensors.numpy import load_file, save_file

    odd = tmp_path / "odd"
    shutil.copytree(hf_tiny, odd)
    state = load_file(odd / "model.safetensors")
    state["model.decoder.layers.0.mlp.gate.weight"] = np.zeros((4, 4), np.float32)
    save_file(state, odd / "model.safetensors")
    with pytest.raises(ModelFileError, match="mlp.gate.weight"):
        convert(odd, tmp_path / "odd.gguf")
