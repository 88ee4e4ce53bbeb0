"""Parakeet's log-mel features: NeMo's ``AudioToMelSpectrogramPreprocessor`` as transcribe.cpp computes it.

Pre-emphasis y[n] = x[n] - 0.97·x[n-1]; frames every 10 ms, centred (the signal zero-padded by
n_fft/2 on both sides, n // 160 + 1 frames); a symmetric Hann window of 400 samples centred in a
512-point FFT; power spectrum through a Slaney-normalised mel filterbank (128 bins, 0-8 kHz);
natural log of (power + 2⁻²⁴). With ``per_feature`` normalisation each mel bin is shifted to mean 0
and scaled by 1/(std + 1e-5) (unbiased std) over all frames but the last, which is a padding
artifact of the centred STFT and is set to 0, as NeMo masks it.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.convert.mel import mel_filterbank
from sayso.engine.parakeet.config import ParakeetConfig
from sayso.engine.spectrum import power_spectrum

LOG_GUARD = 2.0**-24  # NeMo's log_zero_guard_value
NORMALIZE_EPS = 1e-5


class Frontend:
    """Log-mel features for one configuration; the window and filterbank are computed once."""

    def __init__(self, config: ParakeetConfig):
        self.config = config
        c = config
        hann = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(c.win_length) / (c.win_length - 1))  # symmetric
        self.window = np.zeros(c.n_fft)
        start = (c.n_fft - c.win_length) // 2
        self.window[start : start + c.win_length] = hann
        self.filterbank = mel_filterbank(16000, c.n_fft, c.n_mels, c.f_min, c.f_max)  # [n_mels, n_fft/2+1]

    def frames(self, n_samples: int) -> int:
        """How many feature frames ``n_samples`` samples give."""
        return n_samples // self.config.hop_length + 1

    def __call__(self, pcm: np.ndarray) -> np.ndarray:
        """pcm: 16 kHz mono float [n] -> float32 [n_mels, n // hop + 1]."""
        c = self.config
        half = c.n_fft // 2
        padded = np.zeros(len(pcm) + 2 * half)  # float64, the centred frames' zeros on both sides
        x = padded[half : half + len(pcm)]
        x[:] = pcm
        if c.pre_emphasis:
            x[1:] -= c.pre_emphasis * x[:-1]
        n_frames = self.frames(len(x))
        frames = np.lib.stride_tricks.sliding_window_view(padded, c.n_fft)[:: c.hop_length][:n_frames]
        power = power_spectrum(frames, self.window, c.n_fft)
        mel = np.log(self.filterbank @ power.T + np.float32(LOG_GUARD))  # [n_mels, T]
        valid = n_frames - 1  # the last centred frame is padding
        mel[:, valid:] = 0.0
        if c.normalize == "per_feature" and valid > 1:
            kept = mel[:, :valid].astype(np.float64)
            mean = kept.mean(axis=1, keepdims=True)
            std = kept.std(axis=1, ddof=1, keepdims=True)
            mel[:, :valid] = (kept - mean) / (std + NORMALIZE_EPS)
        return mel.astype(np.float32)
