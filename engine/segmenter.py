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


class Cutter:
    """Cuts audio that arrives in chunks into pieces of at most ``max_seconds``, as it arrives.

    ``push`` returns the pieces completed by a chunk as ``(start_sample, pcm)``; ``rest`` is the
    unfinished piece. A cut depends only on the audio before the limit, so the pieces are the same
    whatever the chunks: a live dictation is cut where its recording would be.
    """

    def __init__(self, max_seconds: float = 30.0, search_seconds: float = 5.0):
        self.limit = int(max_seconds * SAMPLE_RATE)
        self.search = int(search_seconds * SAMPLE_RATE)
        self.start = 0  # sample where the unfinished piece starts
        self._buffer = np.zeros(SAMPLE_RATE, np.float32)  # grows by doubling: no copy per chunk
        self._length = 0

    @property
    def rest(self) -> np.ndarray:
        """The unfinished piece so far (a view: later pushes don't change its samples)."""
        return self._buffer[: self._length]

    def push(self, chunk: np.ndarray) -> list[tuple[int, np.ndarray]]:
        chunk = np.asarray(chunk, np.float32).reshape(-1)
        if self._length + len(chunk) > len(self._buffer):
            grown = np.zeros(max(2 * len(self._buffer), self._length + len(chunk)), np.float32)
            grown[: self._length] = self.rest
            self._buffer = grown
        self._buffer[self._length : self._length + len(chunk)] = chunk
        self._length += len(chunk)
        done = []
        while self._length > self.limit:
            done.append(self.cut(quietest_cut(self.rest, self.limit - self.search, self.limit)))
        return done

    def cut(self, at: int) -> tuple[int, np.ndarray]:
        """End the unfinished piece at its sample ``at``: returns it as ``(start_sample, pcm)``; what
        follows begins the next piece."""
        buffer = self.rest
        self._buffer = buffer[at:].copy()  # a new array: the piece handed out stays as it is
        self._length = len(self._buffer)
        self.start += at
        return self.start - at, buffer[:at]


def pieces(
    chunks: Iterable[np.ndarray],
    max_seconds: float = 30.0,
    search_seconds: float = 5.0,
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(start_seconds, pcm)`` pieces of at most ``max_seconds`` from a stream of 16 kHz chunks.

    Each cut is at the quietest moment of the last ``search_seconds`` before the limit. Only the
    unfinished piece is buffered.
    """
    cutter = Cutter(max_seconds, search_seconds)
    for chunk in chunks:
        for start, piece in cutter.push(chunk):
            yield start / SAMPLE_RATE, piece
    if len(cutter.rest):
        yield cutter.start / SAMPLE_RATE, cutter.rest
