"""Voice activity: where the speech is, so that silence never reaches a decoder.

Whisper, given silence or hiss, writes what its training subtitles said over silence ("Thank you.",
"you"); Moonshine babbles. So every piece of audio is first run through Silero VAD (v6, MIT licence):
a take with no speech gives no text and never reaches the model.

Voice detection decides *whether* a piece holds speech (and so whether the model runs at all), never
how much of the speech the model hears: a piece with speech goes to the model from ``CONTEXT_BEFORE``
before its first speech window to its very end. Silero starts a segment only once a window is clearly
speech, which on a soft onset (a quiet first syllable, telephone-band audio) comes after the first
word has begun, and ends it before a soft last word fades: trimming a piece to its segments with a
0.1 s margin lost first words ("Please wait while..." came out as "Wait while..."), and margins of up
to a second still changed words elsewhere in a 30 s window, since Whisper's text depends on where in
its window the speech falls. Both model families give the same text with long silence or noise after
the speech as without, so the end is never cut. Before the speech the cut stays: Whisper's first
timestamp may be at most 1 s into its window, and it writes 0.00 even with two seconds of silence
before the first word. So the span also says where the speech began (``Span.speech``), and the engine
moves any time before ``ONSET_MARGIN`` ahead of it there. Hearing the piece to its end costs a live
dictation its early final pass (``engine.stream``).

The model is the ONNX file of the ``silero-vad`` package on PyPI (MIT licence), shipped in Sayso's own
package (``sayso.resources``, with its licence) rather than installed with that package, which
depends on PyTorch; ``engine.silero`` runs its network in numpy with the file's weights. It reads 512
samples (32 ms at 16 kHz) at a time, with the 64 samples before them as context and a recurrent state
carried from window to window, and gives the probability that the window holds speech.

Windows are turned into speech segments as Silero's ``get_speech_timestamps`` does (hysteresis between
two thresholds, short blips dropped). The same ``Vad`` object serves a whole file and a live stream:
fed all at once or in chunks of any size, it runs the same windows in the same order, so a dictation's
segments equal those of the finished recording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sayso.engine.silero import CONTEXT, STATE_SHAPE, WINDOW, SileroModel

SAMPLE_RATE = 16000
THRESHOLD = 0.5  # a window at or above this starts speech
NEG_THRESHOLD = 0.35  # a window below this, in speech, may end it (Silero's threshold - 0.15)
MIN_SPEECH = 4000  # samples (0.25 s): shorter bursts are clicks or breaths, not words
MIN_SILENCE = 1600  # samples (0.1 s) of quiet that end a segment
CONTEXT_BEFORE = 32000  # samples (2 s) the model hears before the first speech window: soft onsets
ONSET_MARGIN = 0.5  # seconds a soft first word can begin before Silero's first speech window
PAUSE_SECONDS = 0.8  # hands-free dictation stops after this long a pause
CLOSING_PAUSE = 0.4  # a dictation's piece is closed after this long a pause (``engine.stream``): the gap
# between two phrases, longer than the stops inside a word


class Span(NamedTuple):
    """Samples ``[start, end)`` of a piece go to the model; its first speech window starts at ``speech``."""

    start: int
    end: int
    speech: int


@dataclass(frozen=True)
class VadStatus:
    """What a live ``Vad`` has heard so far: ``speech``, it is in speech now; ``ended``, speech was heard
    and it has been quiet for the pause since (hands-free dictation stops); ``quiet``, the sample where
    the quiet after the last speech began (None while in speech or before any)."""

    speech: bool
    ended: bool
    quiet: int | None = None


class Vad:
    """Silero VAD over audio that arrives in chunks of any size (or all at once).

    ``feed`` runs every complete window; ``segments`` gives the speech as if the audio ended now, the
    last partial window padded with zeros, as Silero's ``get_speech_timestamps`` would for the audio so
    far, without touching the state that later windows continue from.
    """

    def __init__(self, pause: float = PAUSE_SECONDS, model: SileroModel | None = None):
        self.model = model or SileroModel.shared()
        self.pause = int(round(pause * SAMPLE_RATE))
        self.samples = 0  # fed so far
        self.probabilities: list[float] = []  # one per complete window
        self._state = np.zeros(STATE_SHAPE, np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)  # samples after the last complete window

    def feed(self, chunk: np.ndarray) -> VadStatus:
        """Take the next samples (16 kHz mono float32) and say what has been heard so far."""
        chunk = np.asarray(chunk, np.float32).reshape(-1)
        self.samples += len(chunk)
        pending = np.concatenate([self._pending, chunk])
        complete = len(pending) // WINDOW * WINDOW
        if complete:
            # each window with the CONTEXT samples before it: overlapping views of one array
            stream = np.concatenate([self._context, pending[:complete]])
            windows = np.lib.stride_tricks.sliding_window_view(stream, CONTEXT + WINDOW)[::WINDOW]
            probabilities, self._state = self.model.run(windows, self._state)
            self.probabilities.extend(probabilities.tolist())
            self._context = stream[-CONTEXT:]
        self._pending = pending[complete:]
        return self.status()

    def status(self) -> VadStatus:
        raw, open_ended = _raw_segments(self.probabilities, len(self.probabilities) * WINDOW)
        heard = raw[-1][1] if raw and not open_ended else None
        return VadStatus(speech=open_ended, ended=heard is not None and self.samples - heard >= self.pause, quiet=heard)

    def segments(self) -> list[tuple[int, int]]:
        """Speech as (start, end) sample indices of Silero's windows, as if the audio ended now."""
        probabilities = self.probabilities
        if len(self._pending):
            last = np.concatenate([self._context, self._pending, np.zeros(WINDOW - len(self._pending), np.float32)])
            probabilities = [*probabilities, float(self.model.run(last[None], self._state)[0][0])]
        return _raw_segments(probabilities, self.samples)[0]

    def span(self) -> Span | None:
        """What the model hears, as if the audio ended now: from ``CONTEXT_BEFORE`` before the first
        speech to the end; None when there is no speech."""
        found = self.segments()
        if not found:
            return None
        return Span(max(0, found[0][0] - CONTEXT_BEFORE), self.samples, found[0][0])


def speech_segments(pcm: np.ndarray) -> list[tuple[int, int]]:
    """Speech in 16 kHz audio as (start, end) sample indices; [] for silence."""
    vad = Vad()
    vad.feed(pcm)
    return vad.segments()


def speech_span(pcm: np.ndarray) -> Span | None:
    """The stretch of ``pcm`` a model hears (``Vad.span``), or None when it holds no speech."""
    vad = Vad()
    vad.feed(pcm)
    return vad.span()


def _raw_segments(probabilities, n_samples: int) -> tuple[list[tuple[int, int]], bool]:
    """Segments before margins, and whether the last one runs on to the end of the audio (``n_samples``).

    Silero's rules: a window at or above THRESHOLD starts speech; in speech, quiet starts at the first
    window below NEG_THRESHOLD and ends the segment there once MIN_SILENCE has passed, unless speech
    returns first; segments of MIN_SPEECH or less are dropped; speech at the end runs to the end.
    """
    found: list[tuple[int, int]] = []
    start = None  # sample where the current segment began
    quiet = 0  # sample where the current quiet began (0: none; a window at 0 can't end speech)
    for i, probability in enumerate(probabilities):
        at = i * WINDOW
        if probability >= THRESHOLD:
            quiet = 0
            if start is None:
                start = at
                continue
        if start is not None and probability < NEG_THRESHOLD:
            quiet = quiet or at
            if at - quiet >= MIN_SILENCE:
                if quiet - start > MIN_SPEECH:
                    found.append((start, quiet))
                start, quiet = None, 0
    open_ended = start is not None and n_samples - start > MIN_SPEECH
    if open_ended:
        found.append((start, n_samples))
    return found, open_ended

