"""Cuts long audio into pieces a model can take in one window, at the quietest moments.

Whisper sees 30 s at a time. Cutting blindly at 30 s splits a word in two and both halves come out
wrong; cutting at the quietest 20 ms in the last few seconds before the limit almost always lands
in a pause between words. Audio arrives as a stream of chunks, so an hour-long file is cut while it
is decoded and never held whole in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

SAMPLE_RATE = 16000
FRAME = 320  # 20 ms: short enough to find the gap between two words
HOP = 160


def quietest_cut(pcm: np.ndarray, lo: int, hi: int) -> int:
    """The sample index in [lo, hi) at the centre of the 20 ms frame with the least energy."""
    lo, hi = max(0, lo), min(len(pcm), hi)
    if hi - lo < FRAME:
        return hi
    frames = np.lib.stride_tricks.sliding_window_view(pcm[lo:hi], FRAME)[::HOP]
    energy = np.einsum("ij,ij->i", frames, frames)
    return lo + int(np.argmin(energy)) * HOP + FRAME // 2


def pieces(
    chunks: Iterable[np.ndarray],
    max_seconds: float = 30.0,
    search_seconds: float = 5.0,
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(start_seconds, pcm)`` pieces of at most ``max_seconds`` from a stream of 16 kHz chunks.

    Each cut is at the quietest moment of the last ``search_seconds`` before the limit. Only the
    unfinished piece is buffered.
    """
    limit = int(max_seconds * SAMPLE_RATE)
    search = int(search_seconds * SAMPLE_RATE)
    buffer = np.zeros(0, np.float32)
    start = 0
    for chunk in chunks:
        buffer = np.concatenate([buffer, np.asarray(chunk, np.float32).reshape(-1)])
        while len(buffer) > limit:
            cut = quietest_cut(buffer, limit - search, limit)
            yield start / SAMPLE_RATE, buffer[:cut]
            buffer = buffer[cut:]
            start += cut
    if len(buffer):
        yield start / SAMPLE_RATE, buffer
