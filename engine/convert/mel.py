"""Whisper's front-end constants, computed: the Slaney mel filterbank and the periodic Hann window.

transcribe.cpp's files carry both as tensors (``frontend.mel_filterbank`` [n_mels, n_fft/2+1],
``frontend.window`` [n_fft]) so the runtime doesn't recompute them. Whisper's filters are
librosa's ``filters.mel(sr=16000, n_fft=400, n_mels=80)`` (htk=False, norm='slaney'); this is the
same formula in numpy with librosa's roundings (triangles stored as float32, then scaled by a
float64 norm), which makes the filters bit-identical to the ones Whisper and transcribe.cpp ship.
"""

from __future__ import annotations

import numpy as np

_F_SP = 200.0 / 3  # Hz per mel in the linear part of Slaney's scale
_MIN_LOG_HZ = 1000.0  # where the scale turns logarithmic
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOG_STEP = np.log(6.4) / 27.0


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    log_part = _MIN_LOG_MEL + np.log(np.maximum(hz, _MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOG_STEP
    return np.where(hz >= _MIN_LOG_HZ, log_part, hz / _F_SP)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    """Inverse of ``hz_to_mel``."""
    mel = np.asarray(mel, dtype=np.float64)
    log_part = _MIN_LOG_HZ * np.exp(_LOG_STEP * (mel - _MIN_LOG_MEL))
    return np.where(mel >= _MIN_LOG_MEL, log_part, mel * _F_SP)


def mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, f_min: float = 0.0, f_max: float | None = None
) -> np.ndarray:
    """Triangular filters [n_mels, n_fft // 2 + 1] over the rFFT bins, each of peak height
    2 / (its bandwidth in Hz) (Slaney norm: equal area), float32."""
    f_max = sample_rate / 2 if f_max is None else f_max
    fft_hz = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    edges = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling)).astype(np.float32)
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]  # computed in float64, stored in float32
    return weights


def hann_periodic(length: int) -> np.ndarray:
    """The periodic Hann window [length] (denominator N, as torch.hann_window), float32."""
    n = np.arange(length, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / length)).astype(np.float32)
