"""GigaAM's log-mel features (its ``FeatureExtractor``: torchaudio's MelSpectrogram then
``log(clamp(x, 1e-9, 1e9))``), with the window and HTK filterbank the model file carries.

Frames are not centred: frame t covers samples 160·t .. 160·t + 319, so n samples give
(n - 320) // 160 + 1 frames. Each is windowed (periodic Hann, ``frontend.window`` [320]), its power
spectrum (161 bins) goes through ``frontend.mel_filterbank`` [64, 161], and the natural log is taken
of the clamped energies. There is no normalisation.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gigaam.config import GigaamConfig
from sayso.engine.spectrum import power_spectrum


class Frontend:
    def __init__(self, model_file: ModelFile, config: GigaamConfig):
        self.config = config
        self.window = model_file.array("frontend.window").astype(np.float64)  # [win_length]
        self.filterbank = model_file.array("frontend.mel_filterbank")  # [n_mels, n_fft/2+1]

    def frames(self, n_samples: int) -> int:
        """How many feature frames ``n_samples`` samples give (0 below one window)."""
        c = self.config
        return 0 if n_samples < c.win_length else (n_samples - c.win_length) // c.hop_length + 1

    def __call__(self, pcm: np.ndarray) -> np.ndarray:
        """pcm: 16 kHz mono float [n] -> float32 [n_mels, frames(n)]."""
        c = self.config
        n_frames = self.frames(len(pcm))
        frames = np.lib.stride_tricks.sliding_window_view(np.asarray(pcm, np.float64), c.win_length)
        frames = frames[:: c.hop_length][:n_frames]
        power = power_spectrum(frames, self.window, c.n_fft)
        mel = self.filterbank @ power.T
        return np.log(np.clip(mel, c.log_clamp_min, c.log_clamp_max)).astype(np.float32)
