"""The GPU's frontend kernels against the numpy backend, and Whisper's log-mel computed with backend
ops (``BackendLogMel``, what a GPU engine uses) against the float64 ``LogMel`` on real speech."""

from __future__ import annotations

import numpy as np
import pytest

from support.data import AUDIO, TINY_EN_GGUF
from sayso.engine.audio import load_audio
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.whisper.frontend import N_FRAMES, BackendLogMel, LogMel

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rows, frames", [(1, 1), (7, 9), (300, 300), (1102, 3000)])
def test_whisper_log_mel_normalisation(gpu_ops, cpu_ops, rows, frames):
    """The clamp takes the window's maximum, silence's -10 included when there are silent frames:
    powers spread over twelve decades so that many values are clamped."""
    power = (10.0 ** np.random.default_rng(rows).uniform(-12, 0, (rows, 80))).astype(np.float32)
    got = gpu_ops.read(gpu_ops.whisper_log_mel(gpu_ops.tensor(power), frames))
    want = cpu_ops.whisper_log_mel(power, frames)
    assert got.shape == want.shape == (frames, 80)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_whisper_log_mel_refuses_more_rows_than_frames(gpu_ops):
    with pytest.raises(ValueError, match="4 rows"):
        gpu_ops.whisper_log_mel(gpu_ops.tensor(np.ones((4, 80), np.float32)), 3)


@pytest.fixture(scope="module")
def frontend():
    model_file = ModelFile(TINY_EN_GGUF)
    return model_file.array("frontend.mel_filterbank"), model_file.array("frontend.window")


@pytest.mark.parametrize("clip, seconds", [("jfk.wav", 30), ("cards/001.wav", 30), ("jfk.wav", 0.005), ("two_cities.wav", 30)])
def test_backend_log_mel_matches_float64(gpu_ops, frontend, clip, seconds):
    """Speech, a clip shorter than one hop, and a clip that fills the window (its last frames
    reflect audio, not silence): within 1e-4 of the float64 FFT's features."""
    pcm = load_audio(AUDIO / clip)[: int(seconds * 16000)]
    got = gpu_ops.read(BackendLogMel(gpu_ops, *frontend)(pcm, N_FRAMES))
    want = LogMel(*frontend)(pcm, N_FRAMES).T
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
