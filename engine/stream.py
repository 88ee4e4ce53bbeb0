"""Streaming dictation: text while you speak, and at key-up the text of the recording, most of it ready.

    session = engine.stream()
    for chunk in microphone:
        shown = session.feed(chunk)      # the text so far; returns at once
    transcript = session.finish()        # the whole take's text and segments

A take is cut into pieces as it is recorded, and each piece is transcribed as ``engine.transcribe``
transcribes one: ``Engine.transcribe_piece`` on the same samples, with the same span of speech
(``engine.vad`` over the same 32 ms windows in the same order).

* A piece is closed by a pause: once it holds ``MIN_CLOSED_PIECE`` seconds and its speech has been
  followed by ``engine.vad.CLOSING_PAUSE`` of quiet, it ends at the quietest moment of that pause and
  the next piece begins there. Its pass, on the whole piece, is final and runs at once while the speaker
  goes on, so the key-up waits only for the piece still open: what it costs depends on the length of
  that piece, not of the take. A piece the speaker fills without such a pause is cut at the model's
  window (30 s) where ``engine.segmenter`` cuts a recording.
* A take with no closing pause is one piece, and ``finish`` gives exactly what ``transcribe`` gives on
  the same audio. A take of several pieces may differ from it: the offline pass cuts only at the
  window, and a model's words near a cut may change with what it hears around them (docs/ARCHITECTURE.md).
* A pause in the open piece of ``KEY_UP_QUIET``, half of one that closes a piece, starts a pass on it,
  even where no partial pass runs, for families that read windows (Whisper) and, for every family, on
  a piece after the take's first: if the key-up comes in that pause, with nothing the VAD takes for
  speech after the audio the pass heard, that pass is final and the key-up waits only for what is left
  of it. Whisper hears every piece padded with silence to its window, so the quiet it did not hear
  changes its text little: the take's text is the offline one, and the words' probabilities (perhaps
  their times) may differ a little. Other families hear the piece's length and may change a word with
  more quiet ("10" for "ten"): a take of one piece, whose text is the offline one, has its key-up pass
  on the whole piece; a take of several may differ from the offline text anyway (above). If the
  speaker goes on, the pass is stale (below; docs/PERFORMANCE.md: the pause's pass).
* ``feed`` (the caller's thread) cuts pieces and runs the VAD on the new audio, a small fraction of real time
  (docs/PERFORMANCE.md: a stream's feed).
* Passes run on the session's own thread. A pass on the open piece transcribes its speech so far
  exactly as ``transcribe`` would if the recording ended now, and is kept under its key (the span of
  samples and the language it started with). The family's frontend keeps its frames between passes
  (Whisper's log-mel power frames, Moonshine's first stem convolution, see ``transcriber.features``),
  so each frame is computed once, by the first pass that needs it. What follows the frontend
  (Moonshine's GroupNorm over the whole utterance, every encoder's attention, the decoder's
  cross-attention) depends on all of the audio, so each pass runs the encoder again and decodes
  greedily from the start.
* Once a piece holds speech, the model hears it from shortly before the speech to its very end
  (``engine.vad``): its final pass is the one on all of its audio.
* ``finish`` takes every pass whose key matches its piece's, or that a pause made final, and runs what
  is missing: the open piece, and any closed piece whose pass is not done yet.

Passes while speech goes on give the partial text. Each costs more than the last (the encoder sees the
whole piece), so they keep to real time: another starts only when the audio that arrived since the
last one started is at least as long as that pass took, and at least ``MIN_STEP``; until then it is
skipped, never queued.

A pass under way is stale the moment newer audio makes it useless: its piece was closed (or the key-up
came, ``finish``) and the pass heard less of it than its final pass will; or it is a pause's pass and
the speaker went on, so its text is no longer final, and no partial text is wanted or the next
pause's pass is due. Families that take an ``interrupt`` (Moonshine, Whisper) drop it at their next
encoder block or decoder step (a GPU's batch of steps, with no read-back for it), so the pass that
counts starts at once. The others run it to its end first, so for them partial passes on the open
piece run only while one takes at most ``UNINTERRUPTIBLE_BUDGET`` (the engine remembers the last
pass's time from one dictation to the next): the key-up must never wait seconds for a pass it can't
use.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sayso.engine import audio
from sayso.engine.errors import Interrupted, SaysoError
from sayso.engine.segmenter import SAMPLE_RATE, Cutter, quietest_cut
from sayso.engine.silero import WINDOW
from sayso.engine.transcript import Segment, Transcript
from sayso.engine.vad import CLOSING_PAUSE, PAUSE_SECONDS, THRESHOLD, Span, Vad, VadStatus

log = logging.getLogger(__name__)

FEED_SECONDS = 0.05  # how often a dictation's new audio reaches its session (the app's tick, the bench's chunk):
# the VAD sees the speaker's pause (hands-free dictation stops) at most this late
MIN_STEP = 0.25  # seconds of new audio before another partial pass
UNINTERRUPTIBLE_BUDGET = 0.5  # seconds a pass may take for partial passes to run when the family can't drop one
MIN_CLOSED_PIECE = 8.0  # seconds of a piece before the pause that closes it
KEY_UP_QUIET = CLOSING_PAUSE / 2  # seconds of quiet after the speech that a pause's pass hears: the key-up
# often comes within a pause's first half second, and the pass that will be its text has begun by then
IDLE_CHECK = 0.1  # seconds between the pass thread's looks when no audio arrives


@dataclass(eq=False)
class _Piece:
    """One piece of the take (the engine cuts at its window, 30 s) and what was done for it."""

    start: int  # first sample, in the take
    vad: Vad | None  # fed every sample of the piece (None: the engine doesn't detect speech)
    pcm: np.ndarray | None = None  # the whole piece, once it is complete
    span: Span | None = None  # its speech, once it is complete
    key: tuple | None = None  # (span, language in) of the last pass
    result: tuple[list[Segment], str | None] = field(default_factory=lambda: ([], None))
    features: Any = None  # the family's frontend frames, for audio that starts at ``origin``
    origin: int | None = None
    backend: int = 0  # the engine's ``backend_serial`` they were made on


@dataclass(frozen=True)
class _Pass:
    piece: _Piece
    pcm: np.ndarray  # the piece so far (its samples never change)
    span: Span
    language: str | None
    audio_at_start: int  # samples in the take when the pass was chosen
    interrupt: threading.Event = field(default_factory=threading.Event)


class StreamSession:
    """One dictation being spoken; see the module docstring. Made by ``Engine.stream``.

    ``partials``: run passes while speech goes on, for the text so far (otherwise only the passes that
    ``finish`` will use). ``background``: run passes on the session's thread; without it ``feed`` runs
    the pass that is due itself (tests, and callers that have a thread to spare). ``pause``: the quiet
    after speech at which ``status.ended`` becomes true (hands-free dictation).
    """

    def __init__(self, engine, language: str | None = None, task: str = "transcribe", prompt: str | None = None,
                 partials: bool = True, background: bool = True, pause: float = PAUSE_SECONDS):
        self.engine = engine
        self.language, self.task, self.prompt = language, task, prompt
        self.partials = partials
        self._pause = pause
        self._cutter = Cutter(engine.transcriber.window_seconds)
        self._pieces = [self._new_piece(0)]
        self._samples = 0  # fed so far
        self._text = ""
        self._status = VadStatus(speech=False, ended=False)
        self._quiet_since: int | None = None  # sample of the take where the quiet after the last speech began
        self._cond = threading.Condition()
        self._closed = False
        self._in_flight: _Pass | None = None  # the pass under way on the session's thread
        # the cadence: where the last pass started (samples), how long it took, when it ended
        self._last_start, self._last_seconds, self._last_end = 0, engine.pass_seconds, 0.0
        self._thread = threading.Thread(target=self._work, name="sayso-stream", daemon=True) if background else None
        if self._thread is not None:
            self._thread.start()

    # ---- the caller's side ------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text so far (from the latest pass of each piece)."""
        with self._cond:
            return self._text

    @property
    def status(self) -> VadStatus:
        """Whether the speaker is speaking, and whether they have paused long enough to stop."""
        with self._cond:
            return self._status

    @property
    def samples(self) -> int:
        """Samples fed so far."""
        with self._cond:
            return self._samples

    def feed(self, chunk: np.ndarray) -> str:
        """Take the next 16 kHz mono samples; return the text so far."""
        chunk = audio.sanitized(np.asarray(chunk, np.float32).reshape(-1), "the dictation")
        with self._cond:
            if self._closed:
                raise SaysoError("This dictation is finished; start a new stream for more audio.")
            self._samples += len(chunk)
            completed = self._cutter.push(chunk)
            current = self._pieces[-1]
            if completed:
                self._pieces.pop()
                for start, pcm in completed:
                    piece = current if start == current.start else self._new_piece(start)
                    piece.pcm, piece.span = pcm, self.engine.speech_span(pcm)
                    self._pieces.append(piece)
                current = self._new_piece(self._cutter.start)
                self._pieces.append(current)
                chunk = self._cutter.rest  # the new piece's VAD starts at its own first sample
            if current.vad is not None:
                status = current.vad.feed(chunk)
                if self._closes(status):
                    current = self._close_at_pause(current, status.quiet)
                    status = current.vad.status()
                self._status = self._heard(current, status)
            self._drop_stale_pass()
            self._cond.notify_all()
        if self._thread is None:
            self._step()
        return self.text

    def finish(self) -> Transcript:
        """The transcript of everything fed (equal to ``engine.transcribe`` of it where the take is one
        piece, in text where Whisper's take ends in a pause); ends the session."""
        with self._cond:
            rest = self._cutter.rest
            current = self._pieces[-1]
            if len(rest):
                current.pcm, current.span = rest, self._live_span(current)
            else:
                self._pieces.pop()  # no audio after the last cut: no piece, as ``segmenter.pieces``
        self.close()
        segments: list[Segment] = []
        language, duration = self.language, 0.0
        for piece in self._pieces:
            if piece.key != (piece.span, language) and not self._kept_is_final(piece, language):
                if piece.span is None:
                    piece.key, piece.result = (None, language), ([], language)
                else:
                    self._run(_Pass(piece, piece.pcm, piece.span, language, self._samples))
            found, language = piece.result
            segments.extend(found)
            duration = piece.start / SAMPLE_RATE + len(piece.pcm) / SAMPLE_RATE
        return self.engine.make_transcript(segments, language, duration)

    def close(self) -> None:
        """Stop the session's thread, dropping a pass under way unless ``finish`` will use it."""
        with self._cond:
            self._closed = True
            job = self._in_flight
            if job is not None and job.span != job.piece.span \
                    and not (job.piece.pcm is not None and self._final_so_far(job.piece, job.span)):
                job.interrupt.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    # ---- passes ---------------------------------------------------------------------------------------

    def _new_piece(self, start: int) -> _Piece:
        return _Piece(start, self.engine.speech_vad(self._pause))

    def _closes(self, status: VadStatus) -> bool:
        """Whether the pause the unfinished piece is in closes it: long enough, after enough audio for the
        model to hear its words in context (a phrase alone is heard less well)."""
        n = len(self._cutter.rest)
        return status.quiet is not None and status.quiet >= MIN_CLOSED_PIECE * SAMPLE_RATE \
            and n - status.quiet >= CLOSING_PAUSE * SAMPLE_RATE

    def _close_at_pause(self, piece: _Piece, quiet: int) -> _Piece:
        """Close the unfinished ``piece`` at the quietest moment of the pause that began at its sample
        ``quiet``, and open the next one with the audio after it (called with the lock held). The closed
        piece is whole: its speech as the live VAD found it, to its last sample."""
        speech = piece.vad.span()
        start, pcm = self._cutter.cut(quietest_cut(self._cutter.rest, quiet, len(self._cutter.rest)))
        piece.pcm, piece.span = pcm, Span(speech.start, len(pcm), speech.speech)
        self._quiet_since = start + quiet
        following = self._new_piece(self._cutter.start)
        following.vad.feed(self._cutter.rest)
        self._pieces.append(following)
        return following

    def _heard(self, piece: _Piece, status: VadStatus) -> VadStatus:
        """The take's status from its unfinished piece's: until that piece hears speech, the quiet that
        closed the piece before it goes on (hands-free dictation stops after the whole pause)."""
        if status.speech or status.quiet is not None:
            self._quiet_since = None if status.speech else piece.start + status.quiet
            return status
        if self._quiet_since is None:
            return status
        return VadStatus(speech=False, ended=self._samples - self._quiet_since >= self._pause * SAMPLE_RATE)

    def _live_span(self, piece: _Piece) -> Span | None:
        """The span of the unfinished piece as if the recording ended now."""
        n = len(self._cutter.rest)
        if piece.vad is None:
            return Span(0, n, 0) if n else None
        return piece.vad.span()

    def _choose(self, now: float) -> _Pass | None:
        """The pass to run next, if any is due (called with the lock held)."""
        language = self.language
        for piece in self._pieces:
            span = piece.span if piece.pcm is not None else self._live_span(piece)
            if piece.key == (span, language):
                language = piece.result[1]
                continue
            if span is None:  # no speech (yet): nothing to transcribe
                if piece.pcm is None:
                    return None
                piece.key, piece.result = (None, language), ([], language)
                continue
            if piece.pcm is not None:  # complete, and final
                return _Pass(piece, piece.pcm, span, language, self._samples)
            if self._kept_is_final(piece, language):
                return None  # the speaker is still in the pause its pass heard: nothing new to transcribe
            if self._final_so_far(piece, span):  # a pause: this pass is the key-up's unless speech comes again
                return _Pass(piece, self._cutter.rest, span, language, self._samples)
            if "interrupt" not in self.engine.transcriber.stream_hooks and self._last_seconds > UNINTERRUPTIBLE_BUDGET:
                return None  # a pass the key-up might have to wait for: leave it all to finish()
            if self.partials and self._due(now):
                return _Pass(piece, self._cutter.rest, span, language, self._samples)
            return None
        return None

    def _final_so_far(self, piece: _Piece, span: Span | None) -> bool:
        """Whether a pass on ``span`` of ``piece`` gives its final text as things stand (called with the
        lock held): the family reads windows (Whisper, whose every piece is padded with silence to its
        window, so more quiet after the speech changes what it hears little) or the piece is not the
        take's first (a take of several pieces may differ from the offline text), the pass heard all of
        the piece's speech and ``KEY_UP_QUIET`` of the quiet after it, and nothing the VAD takes for
        speech came after the audio it heard, a burst too short to count as a word included. Other
        families hear a piece's length (Moonshine normalises over all of it) and may write a word
        otherwise with more quiet after it ("10" for "ten")."""
        if not (self.engine.reads_windows or piece is not self._pieces[0]) or piece.vad is None or span is None \
                or (piece.pcm is not None and span.end > len(piece.pcm)):
            return False
        found = piece.vad.segments()
        if not found or found[0][0] != span.speech:
            return False
        loud = np.flatnonzero(np.asarray(piece.vad.probabilities) >= THRESHOLD)
        last_sound = max(found[-1][1], (loud[-1] + 1) * WINDOW if len(loud) else 0)
        return last_sound + KEY_UP_QUIET * SAMPLE_RATE <= span.end

    def _kept_is_final(self, piece: _Piece, language: str | None) -> bool:
        """Whether the pass kept for ``piece`` gives its final text (``_final_so_far``), with ``language``
        in as its final pass would have (called with the lock held)."""
        return piece.key is not None and piece.key[1] == language and self._final_so_far(piece, piece.key[0])

    def _drop_stale_pass(self) -> None:
        """Interrupt the pass under way once it is stale (module docstring; called with the lock held)."""
        job = self._in_flight
        if job is not None and not job.interrupt.is_set() and self._stale(job):
            job.interrupt.set()

    def _stale(self, job: _Pass) -> bool:
        """Whether newer audio made ``job`` useless (called with the lock held): its piece was cut since it
        started (the piece's final pass, on all of its audio, is the one that counts now); or speech came
        after the pause it heard, so its text is no longer final, and it would give no partial text or a
        pass on the new pause is due."""
        piece = job.piece
        if piece.pcm is not None:
            return job.span != piece.span
        if self._final_so_far(piece, job.span):
            return False
        return not self.partials or self._final_so_far(piece, self._live_span(piece))

    def _due(self, now: float) -> bool:
        """Whether a partial pass keeps up with real time (see the module docstring)."""
        new = (self._samples - self._last_start) / SAMPLE_RATE
        return new >= MIN_STEP and (new >= self._last_seconds or now - self._last_end >= self._last_seconds)

    def _run(self, job: _Pass) -> None:
        """Transcribe ``job`` and keep the result under its key."""
        piece = job.piece
        # Frames are kept for audio that starts where the speech does, on the backend they were made on.
        if piece.origin != job.span[0] or piece.backend != self.engine.backend_serial:
            transcriber = self.engine.transcriber
            piece.features = transcriber.features() if "features" in transcriber.stream_hooks else None
            piece.origin, piece.backend = job.span[0], self.engine.backend_serial
        started = time.monotonic()
        result = self.engine.transcribe_piece(job.pcm, piece.start / SAMPLE_RATE, job.span, job.language,
                                              self.task, self.prompt, piece.features, job.interrupt)
        ended = time.monotonic()
        with self._cond:
            piece.key, piece.result = (job.span, job.language), result
            self._last_start, self._last_seconds, self._last_end = job.audio_at_start, ended - started, ended
            self.engine.pass_seconds = self._last_seconds
            self._text = " ".join(s.text.strip() for p in self._pieces for s in p.result[0] if s.text.strip())

    def _step(self) -> None:
        """Run the pass that is due, if any, on this thread."""
        with self._cond:
            job = self._choose(time.monotonic())
        if job is not None:
            self._run(job)

    def _work(self) -> None:
        """The session's thread: run passes as they fall due until closed."""
        while True:
            with self._cond:
                job = None
                while not self._closed and (job := self._choose(time.monotonic())) is None:
                    self._cond.wait(IDLE_CHECK)
                if self._closed:
                    return
                self._in_flight = job
            try:
                self._run(job)
            except Interrupted:
                pass
            except Exception as error:  # finish() runs the passes it needs again, and raises there
                log.warning("stream: a pass failed; no more text until the end: %s", error)
                return
            finally:
                with self._cond:
                    self._in_flight = None
