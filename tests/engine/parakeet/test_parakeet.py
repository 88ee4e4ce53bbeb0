"""Parakeet TDT v2 and v3 on random-weight models in transcribe.cpp's exact layout: our engine (numpy
backend, and the GPU backend on a short clip) against transcribe.cpp on the same files and audio.

The models are written by ``sayso convert --random`` (``engine.convert.random_model``) with small
dimensions; their heads are calibrated to emit varied tokens, so equal token ids and start times over
several clips exercise the frontend, the subsampling, every block and the TDT search. transcribe.cpp
computes the subsampling's pointwise convolutions in F16, so encoder outputs differ by ~1e-3; the
tokens still agree because the random heads' decisions have margins far above that.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.conformer import (ConformerFamily, check_against_dumps, check_gpu_encoder, check_quantized_file,
                               clips_fixture, random_model_fixture, tokens_matching_transcribe_cpp)
from support.data import AUDIO, needs_clips
from support.reference import reference_tokens
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from sayso.app.cli import main as sayso
from sayso.engine.audio import load_audio
from sayso.engine.convert.random_model import random_layout, write_random_model
from sayso.engine.cpu.ops import dequantize as dequantized
from sayso.engine.engine import Engine
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gguf.writer import Meta
from sayso.engine.ops import WeightSource
from sayso.engine.parakeet import load

CLIPS = ["beckett.wav", "librivox/sense_and_sensibility_01_austen_64kb-0920.wav", "commands/goforward.wav"]
FAMILIES = ["parakeet-tdt-v2", "parakeet-tdt-v3"]
FRONTEND_KEYS = ["type", "num_mels", "sample_rate", "n_fft", "win_length", "hop_length", "window", "normalize",
                 "dither", "pre_emphasis", "f_min", "f_max"]
BLOCK_TENSORS = [
    "norm_ff1.weight", "norm_ff1.bias", "ff1.linear1.weight", "ff1.linear2.weight",
    "norm_attn.weight", "norm_attn.bias", "attn.linear_q.weight", "attn.linear_k.weight", "attn.linear_v.weight",
    "attn.linear_out.weight", "attn.linear_pos.weight", "attn.pos_bias_u", "attn.pos_bias_v",
    "norm_conv.weight", "norm_conv.bias", "conv.pointwise1.weight", "conv.depthwise.weight", "conv.pointwise2.weight",
    "conv.bn.weight", "conv.bn.bias", "conv.bn.running_mean", "conv.bn.running_var",
    "norm_ff2.weight", "norm_ff2.bias", "ff2.linear1.weight", "ff2.linear2.weight", "norm_out.weight", "norm_out.bias",
]  # convert-parakeet.py's ENCODER_BLOCK_TABLE order  # fmt: skip
PARAKEET = ConformerFamily(load, mel_dump="enc.mel.in", encoder_dump="enc.final", text_only=True)


model_path = random_model_fixture(FAMILIES)
clips = clips_fixture(CLIPS)


def test_layout_is_the_converters(model_path):
    """Keys (order and GGUF types) and tensors (order, shapes, F32) as convert-parakeet.py writes them."""
    f = ModelFile(model_path)
    v3 = f.get("stt.variant") == "tdt-0.6b-v3"
    expected = [("general.architecture", "STRING"), ("general.basename", "STRING"), ("general.size_label", "STRING"),
                ("general.version", "STRING"), ("general.file_type", "UINT32"), ("general.languages", "ARRAY[STRING]"),
                ("stt.variant", "STRING")]
    expected += [("stt.capability.lang_detect", "BOOL")] if v3 else []
    expected += [("stt.parakeet.head_kind", "STRING"), ("tokenizer.ggml.model", "STRING"),
                 ("tokenizer.ggml.tokens", "ARRAY[STRING]"), ("tokenizer.ggml.scores", "ARRAY[FLOAT32]"),
                 ("tokenizer.ggml.token_type", "ARRAY[INT32]"), ("tokenizer.ggml.unknown_token_id", "UINT32"),
                 ("tokenizer.ggml.blank_token_id", "UINT32")]
    expected += [(f"stt.parakeet.encoder.{k}", "UINT32") for k in ("n_layers", "d_model", "n_heads", "d_ff", "conv_kernel",
                                                                    "subsampling_factor", "subsampling_channels",
                                                                    "pos_emb_max_len")]
    expected += [("stt.parakeet.encoder.use_bias", "BOOL"), ("stt.parakeet.predictor.hidden", "UINT32"),
                 ("stt.parakeet.predictor.n_layers", "UINT32"), ("stt.parakeet.predictor.vocab", "UINT32"),
                 ("stt.parakeet.joint.hidden", "UINT32"), ("stt.parakeet.joint.num_extra_outputs", "UINT32"),
                 ("stt.parakeet.joint.activation", "STRING"), ("stt.parakeet.tdt.durations", "ARRAY[INT32]"),
                 ("stt.parakeet.tdt.max_symbols", "UINT32")]
    expected += [(f"stt.frontend.{k}", t) for k, t in zip(FRONTEND_KEYS, ["STRING"] + ["UINT32"] * 5 + ["STRING"] * 2
                                                           + ["FLOAT32"] * 4)]
    assert [(k, f.value_type(k)) for k in f.metadata] == expected

    layers, pred_layers = f.get("stt.parakeet.encoder.n_layers"), f.get("stt.parakeet.predictor.n_layers")
    names = [f"enc.pre_encode.{p}.{w}" for p in ("conv.0", "conv.2", "conv.3", "conv.5", "conv.6", "out")
             for w in ("weight", "bias")]
    names += [f"enc.blocks.{i}.{n}" for i in range(layers) for n in BLOCK_TENSORS]
    names += ["pred.embed.weight"] + [f"pred.lstm.{i}.{n}" for i in range(pred_layers) for n in ("Wx", "Wh", "bias")]
    names += [f"joint.{p}.{w}" for p in ("enc", "pred", "out") for w in ("weight", "bias")]
    assert f.names == names
    assert {f.tensor(n).ggml_type for n in names} == {"F32"}
    d, heads, vocab = f.get("stt.parakeet.encoder.d_model"), f.get("stt.parakeet.encoder.n_heads"), f.get("stt.parakeet.predictor.vocab")
    assert f.tensor("enc.blocks.0.attn.pos_bias_u").shape == (heads, d // heads)
    assert f.tensor("enc.blocks.0.conv.depthwise.weight").shape == (d, 1, f.get("stt.parakeet.encoder.conv_kernel"))
    assert f.tensor("enc.pre_encode.conv.3.weight").shape[2:] == (1, 1)
    assert f.tensor("joint.out.weight").shape[0] == vocab + len(f.get("stt.parakeet.tdt.durations"))
    assert len(f.get("tokenizer.ggml.tokens")) == vocab and f.get("tokenizer.ggml.blank_token_id") == vocab - 1


def test_tokens_and_times_match_transcribe_cpp(model_path, clips, cpu_ops):
    emitted = tokens_matching_transcribe_cpp(PARAKEET, model_path, clips, cpu_ops)
    assert len(emitted) >= 50 and len(set(emitted)) >= 20  # the random model says varied things


def test_frontend_encoder_and_search_match_transcribe_cpp_dumps(model_path, cpu_ops, tmp_path):
    """transcribe.cpp's own log-mel and encoder output (TRANSCRIBE_DUMP_DIR, in a fresh process: the
    dumper reads the variable once) against ours: the frontend to 1e-4, the encoder to 1e-2 (its F16
    pointwise convolutions in the subsampling). Our TDT search on *its* encoder output gives exactly
    its tokens, free of encoder rounding (on jfk the v3 model has a near-tie that rounding flips)."""
    pcm = load_audio(AUDIO / "jfk.wav")
    check_against_dumps(PARAKEET, model_path, pcm, cpu_ops, tmp_path, mel_atol=1e-4, encoder_atol=1e-2)


@pytest.mark.parametrize("family", FAMILIES)
def test_quantized_file_matches_transcribe_cpp(family, cpu_ops, tmp_path):
    check_quantized_file(PARAKEET, family, cpu_ops, tmp_path)


def test_weight_slices_keep_q8_0_blocks():
    """A weight's rows (Q8_0 blocks kept) and the conv module's repeated rows give exactly the values
    of the slices of the full weight."""
    values = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    source = WeightSource("w", "Q8_0", (8, 128), quantize(values, GGMLQuantizationType.Q8_0))
    full = dequantized(source)
    for piece, expected, kind in [(source.rows(2, 5), full[2:5], "Q8_0"),
                                  (WeightSource.stacked("s", [source.rows(0, 2), source.rows(0, 2)]),
                                   np.concatenate([full[:2], full[:2]]), "Q8_0")]:
        assert piece.ggml_type == kind and np.array_equal(dequantized(piece), expected)


@needs_clips("cards/001.wav")
@pytest.mark.gpu
def test_gpu_encoder_matches_numpy(model_path, cpu_ops, gpu_ops):
    """The encoder on the GPU (per-head rel-pos attention, the doubled conv module) against numpy."""
    check_gpu_encoder(PARAKEET, model_path, cpu_ops, gpu_ops)


def test_sayso_transcribe(model_path, capsys):
    """The engine and the CLI on such a file: one segment per piece with token times, language from the file."""
    transcript = Engine(model_path, device="cpu").transcribe_file(AUDIO / "jfk.wav")
    assert transcript.segments and transcript.text == transcript.segments[0].text
    assert 0.0 <= transcript.segments[0].start < transcript.segments[0].end <= transcript.duration + 0.5
    assert transcript.language == ("en" if "v2" in transcript.model else "")
    assert sayso(["transcribe", str(AUDIO / "jfk.wav"), "--model", str(model_path), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == transcript.text


@pytest.mark.parametrize("key, value, problem", [
    ("stt.parakeet.encoder.att_context_style", "chunked_limited", "streaming"),
    ("stt.parakeet.prompt.num_prompts", 8, "prompt-conditioned"),
    ("stt.parakeet.head_kind", "multitask", "decoder head 'multitask'"),
])  # fmt: skip
def test_unsupported_variants_are_named(tmp_path, cpu_ops, key, value, problem):
    layout = random_layout("parakeet-tdt-v2", small=True)
    layout.meta = [m for m in layout.meta if m.key != key] + [Meta(key, "STRING" if isinstance(value, str) else "UINT32", value)]
    layout.write(tmp_path / "variant.gguf")
    with pytest.raises(ModelFileError, match=f"tdt-0.6b-v2', .*{problem}"):
        load(ModelFile(tmp_path / "variant.gguf"), cpu_ops)


def test_convert_random_cli(tmp_path):
    assert sayso(["convert", "--random", "parakeet-tdt-v3", str(tmp_path / "v3.gguf"), "--small"]) == 0
    assert ModelFile(tmp_path / "v3.gguf").get("stt.variant") == "tdt-0.6b-v3"
    assert sayso(["convert", "--random", "parakeet-tdt-v4", str(tmp_path / "v4.gguf")]) == 1


@pytest.mark.slow
def test_full_size_model_matches_transcribe_cpp(tmp_path, cpu_ops):
    """Parakeet TDT v2 at its published size (24 layers, d_model 1024, 2.4 GB in F32) on jfk."""
    path = write_random_model("parakeet-tdt-v2", tmp_path / "full.gguf")
    pcm = load_audio(AUDIO / "jfk.wav")
    segments, _ = load(ModelFile(path), cpu_ops).transcribe(pcm)
    ours = [(t.id, round(t.start * 1000)) for s in segments for t in s.tokens]
    assert ours == reference_tokens(path, pcm)[0] and len(ours) >= 10
