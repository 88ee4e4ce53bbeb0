"""Whisper on the wgpu backend gives the same text as on the numpy backend, clip by clip.

On a real GPU every clip of the shared set is compared. On a software adapter (lavapipe in CI: exact,
but slow, seconds for each 30 s window) three short clips are: one sentence, one short answer, digits.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from support.data import AUDIO, TINY_EN_GGUF, needs_clips
from support.gpu import software_gpu
from sayso.engine.audio import load_audio
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.whisper import WhisperTranscriber

pytestmark = pytest.mark.gpu

with open(AUDIO / "transcripts.tsv") as f:
    CLIPS = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
SOFTWARE_CLIPS = ["jfk.wav", "cards/001.wav", "commands/dhd.2934z.wav"]


def pytest_generate_tests(metafunc):
    if "clip" in metafunc.fixturenames:
        metafunc.parametrize("clip", SOFTWARE_CLIPS if software_gpu() else CLIPS)


@pytest.fixture(scope="module")
def transcribers(gpu_ops, cpu_ops):
    model_file = ModelFile(TINY_EN_GGUF)
    return WhisperTranscriber(model_file, gpu_ops), WhisperTranscriber(model_file, cpu_ops)


def test_gpu_text_equals_cpu_text(clip, transcribers):
    gpu, cpu = transcribers
    pcm = load_audio(AUDIO / clip)[: 30 * 16000]  # one window: the long-audio path is the engine's
    gpu_segments, _ = gpu.transcribe(pcm)
    cpu_segments, _ = cpu.transcribe(pcm)
    gpu_text = " ".join(s.text for s in gpu_segments)
    cpu_text = " ".join(s.text for s in cpu_segments)
    print(f"\n{clip}: {gpu_text}")
    assert gpu_text == cpu_text
    assert [(s.start, s.end) for s in gpu_segments] == [(s.start, s.end) for s in cpu_segments]


def test_the_portable_tier_gives_the_fast_tiers_text(transcribers, gpu_ops, monkeypatch):
    """``SAYSO_FAST=0`` (every kernel portable) and the fast tier the device probed give one text."""
    from sayso.engine.gpu import GpuOps
    from sayso.engine.gpu.fast import FAST_ENV

    gpu_ops.fast.probe()  # before the variable is set: the session's backend keeps its fast tier
    monkeypatch.setenv(FAST_ENV, "0")
    portable = WhisperTranscriber(ModelFile(TINY_EN_GGUF), GpuOps(gpu_ops.device))
    assert portable.model.ops.fast.versions == {} and gpu_ops.fast.versions
    pcm = load_audio(AUDIO / "jfk.wav")
    fast_segments, _ = transcribers[0].transcribe(pcm)
    portable_segments, _ = portable.transcribe(pcm)
    assert [(s.text, s.start, s.end) for s in portable_segments] == [(s.text, s.start, s.end) for s in fast_segments]




def encoded_contents(model, output) -> tuple:
    """An encoded window's states and its cross-attention caches' words, as read back from the GPU."""
    ops = model.ops
    return ops.read(output.states), [ops.recorder.read(cache.buffer, cache.nbytes) for cache in output.cross_caches]


@needs_clips("cards/001.wav")
def test_windows_encoded_in_one_pass_are_each_the_window_encoded_alone(gpu_ops, tmp_path):
    """Windows through the encoder together (``Engine.transcribe_many``'s batches): the stem, attention
    and cross-attention caches keep to each window, so its states and caches are those of its own
    pass, to the bit, and its decoding (the same code on the same caches) its text. A small random
    Whisper (two layers, d_model 64): lavapipe takes seconds for a window of tiny.en's encoder."""
    from sayso.engine.convert.random_whisper import write_random_whisper

    path = write_random_whisper("whisper-tiny", tmp_path / "small.gguf", small=True)
    gpu = WhisperTranscriber(ModelFile(path), gpu_ops)
    model = gpu.model
    mels = [gpu.features()(load_audio(AUDIO / clip)[: 4 * 16000], n_frames=2 * model.config.n_audio_ctx)
            for clip in ("jfk.wav", "cards/001.wav")]
    for mel, together in zip(mels, model.encode_many(mels)):
        states, caches = encoded_contents(model, together)
        alone_states, alone_caches = encoded_contents(model, model.encode(mel))
        np.testing.assert_array_equal(states, alone_states)
        assert caches == alone_caches


@pytest.mark.slow
def test_whisper_tiny_gives_windows_encoded_in_one_pass_the_segments_they_get_alone(transcribers):
    """Whisper tiny.en, two files' windows encoded together: each window's text, times and token
    probabilities are those of its own pass."""
    gpu, _ = transcribers
    pieces = [load_audio(AUDIO / clip)[: 4 * 16000] for clip in ("jfk.wav", "cards/001.wav")]
    for pcm, encoded in zip(pieces, gpu.encode_windows(pieces)):
        assert gpu.transcribe(pcm, encoded=encoded) == gpu.transcribe(pcm)
