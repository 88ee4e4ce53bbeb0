"""GigaAM v3 (CTC and RNN-T heads; character and SentencePiece vocabularies) on random-weight models in
transcribe.cpp's exact layout: our engine (numpy backend, and the GPU backend on a short clip)
against transcribe.cpp on the same files and audio.

The models are written by ``sayso convert --random`` (``engine.convert.random_model``) with small
dimensions; their heads are calibrated to emit varied tokens, so equal token ids and start times over
several clips exercise the frontend (the file's own window and filterbank), the conv1d subsampling,
every block (rotary attention, LayerNorm conv module) and the CTC or RNN-T search.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.conformer import (ConformerFamily, check_against_dumps, check_gpu_encoder, check_quantized_file,
                               clips_fixture, random_model_fixture, tokens_matching_transcribe_cpp)
from support.data import AUDIO, needs_clips
from support.reference import reference_tokens

from sayso.app.cli import main as sayso
from sayso.engine.conformer.text import Vocabulary
from sayso.engine.convert.random_model import GIGAAM_CHARS, htk_mel_filterbank, random_layout, write_random_model
from sayso.engine.engine import Engine
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gguf.writer import Meta
from sayso.engine.gigaam import load

CLIPS = ["jfk.wav", "librivox/sense_and_sensibility_01_austen_64kb-0920.wav", "commands/goforward.wav"]
FAMILIES = ["gigaam-v3-ctc", "gigaam-v3-rnnt", "gigaam-v3-e2e-ctc", "gigaam-v3-e2e-rnnt"]
BLOCK_TENSORS = [
    "norm_ff1.weight", "norm_ff1.bias", "ff1.linear1.weight", "ff1.linear1.bias", "ff1.linear2.weight", "ff1.linear2.bias",
    "norm_conv.weight", "norm_conv.bias", "conv.pointwise1.weight", "conv.pointwise1.bias", "conv.depthwise.weight",
    "conv.depthwise.bias", "conv.ln.weight", "conv.ln.bias", "conv.pointwise2.weight", "conv.pointwise2.bias",
    "norm_attn.weight", "norm_attn.bias", "attn.linear_q.weight", "attn.linear_q.bias", "attn.linear_k.weight",
    "attn.linear_k.bias", "attn.linear_v.weight", "attn.linear_v.bias", "attn.linear_out.weight", "attn.linear_out.bias",
    "norm_ff2.weight", "norm_ff2.bias", "ff2.linear1.weight", "ff2.linear1.bias", "ff2.linear2.weight", "ff2.linear2.bias",
    "norm_out.weight", "norm_out.bias",
]  # convert-gigaam.py's ENCODER_BLOCK_TABLE order  # fmt: skip
GIGAAM = ConformerFamily(load, mel_dump="frontend.mel.out", encoder_dump="dec.enc_out", text_only=False)


model_path = random_model_fixture(FAMILIES)
clips = clips_fixture(CLIPS)


def test_layout_is_the_converters(model_path):
    """Keys (order and GGUF types) and tensors (order, shapes, F32) as convert-gigaam.py writes them:
    general identity, variant and head, tokenizer scalars, encoder, head, frontend, then the bulk
    tokenizer arrays last; the frontend tensors, subsampling, blocks, head."""
    f = ModelFile(model_path)
    rnnt, char = f.get("stt.gigaam.head_kind") == "rnnt", f.get("tokenizer.ggml.model") == "char"
    expected = [("general.architecture", "STRING")]
    expected += [(f"general.{k}", "STRING") for k in ("name", "basename", "version", "size_label", "author",
                                                     "organization", "license", "license.name", "license.link")]
    expected += [("general.file_type", "UINT32"), ("general.languages", "ARRAY[STRING]"), ("stt.variant", "STRING"),
                 ("stt.gigaam.head_kind", "STRING"), ("tokenizer.ggml.model", "STRING")]
    expected += [] if char else [("tokenizer.ggml.unknown_token_id", "UINT32")]
    expected += [("tokenizer.ggml.blank_token_id", "UINT32")]
    expected += [(f"stt.gigaam.encoder.{k}", "UINT32") for k in ("n_layers", "d_model", "n_heads", "d_ff", "conv_kernel",
                                                                  "subsampling_factor", "subs_kernel_size",
                                                                  "pos_emb_max_len", "feat_in")]
    expected += [("stt.gigaam.encoder.self_attention_model", "STRING"), ("stt.gigaam.encoder.conv_norm_type", "STRING")]
    if rnnt:
        expected += [(f"stt.gigaam.{k}", "UINT32") for k in ("predictor.hidden", "predictor.n_layers", "predictor.vocab",
                                                             "joint.hidden", "joint.num_classes")]
        expected += [("stt.gigaam.joint.activation", "STRING")]
    else:
        expected += [("stt.gigaam.head.feat_in", "UINT32"), ("stt.gigaam.head.num_classes", "UINT32")]
    expected += [(f"stt.frontend.{k}", "STRING" if k in ("type", "window", "normalize") else "FLOAT32"
                  if k in ("dither", "pre_emphasis", "f_min", "f_max") else "UINT32")
                 for k in ("type", "num_mels", "sample_rate", "n_fft", "win_length", "hop_length", "window", "normalize",
                           "dither", "pre_emphasis", "f_min", "f_max")]
    expected += [("stt.frontend.center", "BOOL"), ("stt.frontend.mel_norm", "STRING"),
                 ("stt.frontend.log_clamp_min", "FLOAT32"), ("stt.frontend.log_clamp_max", "FLOAT32"),
                 ("tokenizer.ggml.tokens", "ARRAY[STRING]"), ("tokenizer.ggml.scores", "ARRAY[FLOAT32]"),
                 ("tokenizer.ggml.token_type", "ARRAY[INT32]")]
    assert [(k, f.value_type(k)) for k in f.metadata] == expected

    names = ["frontend.mel_filterbank", "frontend.window"]
    names += [f"enc.pre_encode.conv.{i}.{w}" for i in (0, 2) for w in ("weight", "bias")]
    names += [f"enc.blocks.{i}.{n}" for i in range(f.get("stt.gigaam.encoder.n_layers")) for n in BLOCK_TENSORS]
    if rnnt:
        names += ["pred.embed.weight"] + [f"pred.lstm.{i}.{n}" for i in range(f.get("stt.gigaam.predictor.n_layers"))
                                          for n in ("Wx", "Wh", "bias")]
        names += [f"joint.{p}.{w}" for p in ("enc", "pred", "out") for w in ("weight", "bias")]
    else:
        names += ["head.ctc.weight", "head.ctc.bias"]
    assert f.names == names
    assert {f.tensor(n).ggml_type for n in names} == {"F32"}
    d, classes = f.get("stt.gigaam.encoder.d_model"), len(f.get("tokenizer.ggml.tokens"))
    assert f.tensor("frontend.mel_filterbank").shape == (64, 161) and f.tensor("frontend.window").shape == (320,)
    assert f.tensor("enc.pre_encode.conv.0.weight").shape == (d, 64, 5)
    assert f.tensor("enc.blocks.0.conv.depthwise.weight").shape == (d, 1, f.get("stt.gigaam.encoder.conv_kernel"))
    assert f.tensor("joint.out.weight" if rnnt else "head.ctc.weight").shape[0] == classes
    assert f.get("tokenizer.ggml.blank_token_id") == classes - 1
    if char:
        assert f.get("tokenizer.ggml.tokens")[:-1] == GIGAAM_CHARS


def test_filterbank_is_torchaudio_htk():
    """The shape of torchaudio.functional.melscale_fbanks(161, 0, 8000, 64, 16000, norm=None, mel_scale="htk")."""
    bank = htk_mel_filterbank(16000, 320, 64)
    assert bank.shape == (64, 161)
    centres = np.argmax(bank, axis=1)
    assert np.all(np.diff(centres) >= 0) and abs(bank[0, 0]) < 1e-6 and abs(bank[-1, -1]) < 1e-6
    # unnormalised HTK triangles (peak 1) overlap by halves: between the first and last centre they sum to 1
    np.testing.assert_allclose(bank.sum(axis=0)[centres[0] : centres[-1] + 1], 1.0, atol=1e-5)


def test_tokens_and_times_match_transcribe_cpp(model_path, clips, cpu_ops):
    # transcribe.cpp keeps runs of spaces (a character model can emit two); we collapse them
    emitted = tokens_matching_transcribe_cpp(GIGAAM, model_path, clips, cpu_ops,
                                             their_text=lambda text: " ".join(text.split()), language="ru")
    assert len(emitted) >= 40 and len(set(emitted)) >= 10  # the random model says varied things


def test_frontend_encoder_and_search_match_transcribe_cpp_dumps(model_path, clips, cpu_ops, tmp_path):
    """transcribe.cpp's own log-mel and encoder output (TRANSCRIBE_DUMP_DIR, in a fresh process: the
    dumper reads the variable once) against ours: the log-mel to 1e-2 (transcribe.cpp's FFT is float32,
    ours float64: the log magnifies the difference in the quietest bins), the encoder to 1e-3."""
    check_against_dumps(GIGAAM, model_path, clips["jfk.wav"], cpu_ops, tmp_path, mel_atol=1e-2, encoder_atol=1e-3)


@pytest.mark.parametrize("family", ["gigaam-v3-ctc", "gigaam-v3-e2e-rnnt"])
def test_quantized_file_matches_transcribe_cpp(family, cpu_ops, tmp_path):
    check_quantized_file(GIGAAM, family, cpu_ops, tmp_path)


@needs_clips("cards/001.wav")
@pytest.mark.gpu
def test_gpu_encoder_matches_numpy(model_path, cpu_ops, gpu_ops):
    """The encoder on the GPU (rotary attention, LayerNorm conv module) against numpy."""
    check_gpu_encoder(GIGAAM, model_path, cpu_ops, gpu_ops)


def test_sayso_transcribe(model_path, capsys):
    clip = AUDIO / CLIPS[1]
    transcript = Engine(model_path, device="cpu").transcribe_file(clip)
    assert transcript.language == "ru" and transcript.model.startswith("GigaAM v3")
    assert all(0.0 <= s.start <= s.end <= transcript.duration + 0.1 for s in transcript.segments)
    assert sayso(["transcribe", str(clip), "--model", str(model_path), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == transcript.text


def test_character_vocabulary_decodes_russian():
    vocabulary = Vocabulary(GIGAAM_CHARS + ["<blank>"], [1] * 33 + [3])
    ids = [GIGAAM_CHARS.index(c) for c in "привет мир"]
    assert vocabulary.decode(ids) == "привет мир"


def test_sentencepiece_byte_fallback():
    vocabulary = Vocabulary(["<unk>", "\u2581при", "вет", "<0xD0>", "<0x81>", "<blank>"], [2, 1, 1, 6, 6, 3])
    assert vocabulary.decode([1, 2, 3, 4]) == " приветЁ"
    assert vocabulary.is_special(0) and vocabulary.is_special(5) and not vocabulary.is_special(1)


@pytest.mark.parametrize("key, value, problem", [
    ("stt.gigaam.encoder.self_attention_model", "rel_pos", "'rel_pos' attention"),
    ("stt.gigaam.encoder.conv_norm_type", "batch_norm", "'batch_norm' in its conv modules"),
    ("stt.gigaam.head_kind", "ssl", "decoder head 'ssl'"),
])  # fmt: skip
def test_unsupported_variants_are_named(tmp_path, cpu_ops, key, value, problem):
    layout = random_layout("gigaam-v3-e2e-ctc", small=True)
    layout.meta = [m if m.key != key else Meta(key, "STRING", value) for m in layout.meta]
    layout.write(tmp_path / "variant.gguf")
    with pytest.raises(ModelFileError, match=f"gigaam-v3-e2e-ctc', .*{problem}"):
        load(ModelFile(tmp_path / "variant.gguf"), cpu_ops)


@pytest.mark.slow
def test_full_size_model_matches_transcribe_cpp(tmp_path, clips, cpu_ops):
    """GigaAM v3 E2E-RNN-T at its published size (16 layers, d_model 768, ~0.9 GB in F32)."""
    path = write_random_model("gigaam-v3-e2e-rnnt", tmp_path / "full.gguf")
    pcm = clips[CLIPS[1]]
    segments, _ = load(ModelFile(path), cpu_ops).transcribe(pcm)
    ours = [(t.id, round(t.start * 1000)) for s in segments for t in s.tokens]
    assert ours == reference_tokens(path, pcm)[0] and len(ours) >= 10
