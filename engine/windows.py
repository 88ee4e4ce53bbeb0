"""Audio read one window at a time, each window starting where the decode of the one before it ended.

Whisper reads long audio as OpenAI's ``transcribe`` and whisper.cpp do: a window of 30 s from where the
text so far ends, moved on by the last complete timestamp the decoder wrote (``engine.whisper``), so a
window is never shorter than the model's and a word is never cut by the window's edge: a word cut off
at the end is heard again, whole, at the start of the next. Where the text ended before its window
did and the voice detector hears speech after a pause in the rest of it, the next window starts at
that speech (``whisper.read_on``): the decoder may end its text at a long silence. The windows follow
the decoder, so they are read from the stream of chunks as it goes, and only the audio from the
current window's start on is held: an hour-long file is never in memory whole.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from sayso.engine.segmenter import SAMPLE_RATE

MIN_WINDOW = SAMPLE_RATE // 10  # less than 0.1 s of audio holds no word: no window is decoded for it


class Windows:
    """Windows of ``seconds`` over audio that arrives in ``chunks`` (16 kHz mono float32).

    ``current`` is the window that starts at sample ``start`` (shorter only at the end of the audio);
    ``advance`` moves the start on. The arrays handed out are never written to afterwards.
    """

    def __init__(self, chunks: Iterable[np.ndarray], seconds: float):
        self.size = int(seconds * SAMPLE_RATE)
        self.start = 0
        self._chunks = iter(chunks)
        self._held = np.zeros(0, np.float32)  # the audio from ``start`` on, read so far
        self._ended = False

    def current(self) -> np.ndarray:
        """The window at ``start``: ``size`` samples, or what is left of the audio."""
        parts = [self._held]
        held = len(self._held)
        while held < self.size and not self._ended:
            chunk = next(self._chunks, None)
            if chunk is None:
                self._ended = True
            else:
                parts.append(np.asarray(chunk, np.float32).reshape(-1))
                held += len(parts[-1])
        if len(parts) > 1:
            self._held = np.concatenate(parts)
        return self._held[: self.size]

    def advance(self, samples: int) -> None:
        """Start the next window ``samples`` after this one's start."""
        self.current()
        self._held = self._held[samples:]
        self.start += samples

    @property
    def end(self) -> int:
        """Samples read so far: the audio's length once ``current`` came back shorter than a window."""
        return self.start + len(self._held)
