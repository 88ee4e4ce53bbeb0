"""Whisper's log-mel features against transformers' WhisperFeatureExtractor, with the GGUF's own filterbank."""


import gguf
import numpy as np
import pytest
from transformers import WhisperFeatureExtractor
from transformers.audio_utils import mel_filter_bank

from support.data import AUDIO, TINY_EN_GGUF, needs_clips
from sayso.engine.audio import load_audio
from sayso.engine.whisper.frontend import N_FRAMES, N_SAMPLES, log_mel, pad_or_trim, reflect_padded


@pytest.fixture(scope="module")
def frontend_tensors():
    """(filterbank [80, 201], window [400]) as the reference GGUF stores them."""
    reader = gguf.GGUFReader(TINY_EN_GGUF)
    tensors = {t.name: np.array(t.data) for t in reader.tensors if t.name.startswith("frontend.")}
    return tensors["frontend.mel_filterbank"], tensors["frontend.window"]


def reference_features(pcm, n_mels=80):
    extractor = WhisperFeatureExtractor(feature_size=n_mels)
    return extractor(pcm, sampling_rate=16000, return_tensors="np").input_features[0]


def slaney_filterbank(n_mels):
    return mel_filter_bank(
        num_frequency_bins=201, num_mel_filters=n_mels, min_frequency=0.0, max_frequency=8000.0,
        sampling_rate=16000, norm="slaney", mel_scale="slaney",
    ).T


def test_gguf_filterbank_and_window_are_whispers(frontend_tensors):
    filterbank, window = frontend_tensors
    assert filterbank.shape == (80, 201) and window.shape == (400,)
    # float32 storage of the float64 Slaney filters: the largest weight is 0.026, so 1e-8 is float32 rounding.
    assert np.abs(filterbank - slaney_filterbank(80)).max() < 1e-8
    periodic_hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)
    assert np.abs(window - periodic_hann).max() < 1e-7


def test_jfk_matches_transformers(frontend_tensors):
    filterbank, window = frontend_tensors
    pcm = load_audio(AUDIO / "jfk.wav")
    ours = log_mel(pad_or_trim(pcm), filterbank, window)
    assert ours.shape == (80, N_FRAMES) and ours.dtype == np.float32
    assert np.abs(ours - reference_features(pcm)).max() < 1e-4  # measured 3.6e-6
    assert np.array_equal(log_mel(pcm, filterbank, window, n_frames=N_FRAMES), ours)


@needs_clips("two_cities.wav")
def test_30s_window_of_48khz_file_matches_transformers(frontend_tensors):
    filterbank, window = frontend_tensors
    pcm = load_audio(AUDIO / "two_cities.wav")[10 * 16000 : 10 * 16000 + N_SAMPLES]
    assert pcm.shape == (N_SAMPLES,)
    assert np.abs(log_mel(pcm, filterbank, window) - reference_features(pcm)).max() < 1e-4  # measured 2.4e-6


@needs_clips("beckett.wav")
def test_128_mel_bins_match_transformers(frontend_tensors):
    """Large-v3 and turbo use 128 mel bins; only the filterbank changes."""
    _, window = frontend_tensors
    pcm = load_audio(AUDIO / "beckett.wav")
    ours = log_mel(pcm, slaney_filterbank(128).astype(np.float32), window, n_frames=N_FRAMES)
    assert ours.shape == (128, N_FRAMES)
    assert np.abs(ours - reference_features(pcm, n_mels=128)).max() < 1e-4


def test_lengths(frontend_tensors):
    filterbank, window = frontend_tensors
    assert pad_or_trim(np.ones(10)).shape == (N_SAMPLES,)
    assert pad_or_trim(np.ones(N_SAMPLES + 5)).shape == (N_SAMPLES,)
    assert log_mel(np.zeros(16000, np.float32) + 0.1, filterbank, window).shape == (80, 100)
    assert log_mel(np.zeros(100, np.float32), filterbank, window).shape == (80, 0)
    assert log_mel(np.zeros(100, np.float32), filterbank, window, n_frames=7).shape == (80, 7)


@pytest.mark.parametrize("n, length, half", [(1000, 1500, 200), (500, 201, 200), (3000, 3000, 200), (0, 300, 200), (10, 1000, 5)])
def test_reflect_padding_is_numpys(n, length, half):
    audio = np.random.default_rng(n).standard_normal(n).astype(np.float32)[:length]
    silence_after = np.zeros(length)
    silence_after[: len(audio)] = audio
    np.testing.assert_array_equal(reflect_padded(audio, length, half), np.pad(silence_after, half, mode="reflect"))
