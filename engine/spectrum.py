"""Power spectra of overlapping audio frames, for the conformer families' log-mel frontends.

The frames of a whole piece windowed and transformed at once made tens of MB of float64 and complex
intermediates: the largest allocation a GPU transcription made on the host, and so its peak memory.
A block of frames at a time keeps them to a block's worth; a frame's spectrum doesn't depend on its
block, so the values are the same.
"""

from __future__ import annotations

import numpy as np

FRAMES_PER_BLOCK = 256


def power_spectrum(frames: np.ndarray, window: np.ndarray, n_fft: int) -> np.ndarray:
    """frames: [T, L] float64 (a strided view of the audio), window: [L] -> float32 [T, n_fft // 2 + 1],
    |rfft(frame · window, n_fft)|² computed in float64."""
    power = np.empty((len(frames), n_fft // 2 + 1), np.float32)
    for start in range(0, len(frames), FRAMES_PER_BLOCK):
        rows = slice(start, start + FRAMES_PER_BLOCK)
        spectrum = np.fft.rfft(frames[rows] * window, n=n_fft, axis=-1)
        power[rows] = spectrum.real**2 + spectrum.imag**2
    return power
