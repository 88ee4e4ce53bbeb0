"""Whisper's log-mel spectrogram, computed as OpenAI's ``whisper.audio`` and transformers compute it.

The window (periodic Hann, [400]) and the Slaney mel filterbank ([n_mels, 201], n_mels 80 or 128) come from
the model file (GGUF tensors ``frontend.window`` and ``frontend.mel_filterbank``), so the features match the
ones the model was trained on bit for bit in layout and within float rounding in value.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
HOP_LENGTH = 160  # 10 ms: one mel frame per hop; the encoder halves this to 20 ms per output position
CHUNK_SECONDS = 30
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # 480000: Whisper always sees a 30 s window
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 mel frames per window


def pad_or_trim(pcm: np.ndarray, n_samples: int = N_SAMPLES) -> np.ndarray:
    """Cut ``pcm`` [n] to ``n_samples`` or pad it with zeros (silence) at the end; float32 [n_samples]."""
    pcm = np.asarray(pcm, dtype=np.float32)
    if pcm.shape[0] >= n_samples:
        return pcm[:n_samples]
    return np.pad(pcm, (0, n_samples - pcm.shape[0]))


def power_spectrum(pcm: np.ndarray, window: np.ndarray) -> np.ndarray:
    """|STFT|² of ``pcm`` [n] as float64 [n // 160, n_fft // 2 + 1].

    Frames are centred (the signal is reflect-padded by n_fft/2 on both sides) and hop 160 samples, as
    ``torch.stft(center=True, pad_mode="reflect")``; the last frame is dropped as Whisper drops it, so there
    are exactly n // 160 frames. The FFT runs in float64, like transformers' numpy path, so that the log of
    small powers agrees with the reference to well under 1e-4.
    """
    n_fft = window.shape[0]
    padded = np.pad(np.asarray(pcm, dtype=np.float64), n_fft // 2, mode="reflect")
    n_frames = pcm.shape[0] // HOP_LENGTH
    # A strided view: frame t is padded[t*hop : t*hop + n_fft]; no copy until the window multiplies it.
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::HOP_LENGTH][:n_frames]
    spectrum = np.fft.rfft(frames * window.astype(np.float64), axis=-1)
    return spectrum.real**2 + spectrum.imag**2


def log_mel(
    pcm: np.ndarray, filterbank: np.ndarray, window: np.ndarray, n_frames: int | None = None
) -> np.ndarray:
    """Whisper's normalised log-mel features, float32 [n_mels, T].

    ``pcm``: 16 kHz mono float [n]. ``filterbank``: [n_mels, n_fft // 2 + 1]. ``window``: [n_fft].
    With ``n_frames`` the audio is first padded with silence or cut to ``n_frames * 160`` samples, so
    ``log_mel(pcm, fb, w, n_frames=3000)`` equals ``log_mel(pad_or_trim(pcm), fb, w)`` (what the encoder
    takes); without it T = n // 160.

    The dynamic range is clamped to 8 (log10 units) below the loudest value of *this* input, so pass the
    whole 30 s window the model will see: the clamp, and so the features, depend on it.
    """
    if n_frames is not None:
        pcm = pad_or_trim(pcm, n_frames * HOP_LENGTH)
    if pcm.shape[0] < HOP_LENGTH:
        return np.zeros((filterbank.shape[0], 0), dtype=np.float32)
    mel = filterbank.astype(np.float64) @ power_spectrum(pcm, window).T
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)
