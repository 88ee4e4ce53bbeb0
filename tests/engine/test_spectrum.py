"""The conformer frontends' power spectra, a block of frames at a time (``engine.spectrum``)."""

import numpy as np

from support.data import AUDIO
from sayso.engine import spectrum
from sayso.engine.audio import load_audio


def test_spectra_a_block_at_a_time_are_those_of_all_frames_at_once(monkeypatch):
    """Blocks bound the host memory a long piece takes; the values must not move: each frame's
    spectrum is the same bits whichever block it falls in (a last block shorter than the others too)."""
    pcm = np.asarray(load_audio(AUDIO / "jfk.wav"), np.float64)
    frames = np.lib.stride_tricks.sliding_window_view(pcm, 400)[::160]  # Parakeet's and GigaAM's hop
    window = np.hanning(400)
    at_once = np.fft.rfft(frames * window, n=512, axis=-1)
    at_once = (at_once.real**2 + at_once.imag**2).astype(np.float32)
    monkeypatch.setattr(spectrum, "FRAMES_PER_BLOCK", 97)
    assert len(frames) % 97 != 0
    blocked = spectrum.power_spectrum(frames, window, 512)
    assert blocked.dtype == np.float32 and blocked.shape == (len(frames), 257)
    assert np.array_equal(blocked, at_once)
