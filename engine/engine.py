"""The engine's front door: load a model on a backend, transcribe audio of any length.

``Engine`` knows nothing of model internals: the family's transcriber handles one piece of audio
(at most its window, 30 s for Whisper) and the engine cuts long audio at quiet moments, skips a piece
without speech and hands the model a piece with speech from just before it (``engine.vad``), shifts
each piece's timestamps onto the file, reports progress and honours cancellation
between pieces. ``stream`` does the same for a dictation while it is being spoken (``engine.stream``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from sayso.engine import audio, families, heap, models
from sayso.engine.background import in_background
from sayso.engine.backend import DeviceChoice, Fallback, import_gpu_backend, make_ops
from sayso.engine.cpu.ops import blas_threads
from sayso.engine.silero import SileroModel
from sayso.engine.vad import ONSET_MARGIN, PAUSE_SECONDS, Span, Vad
from sayso.engine.errors import AudioError, GpuError, ModelFileError, NonFiniteOutput, SaysoError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Backend
from sayso.engine.options import check_options
from sayso.engine.segmenter import SAMPLE_RATE, pieces
from sayso.engine.transcript import Segment, Transcript, not_before
from sayso.engine.windows import MIN_WINDOW, Windows

log = logging.getLogger(__name__)

Progress = Callable[[float], None]

HOST_BLAS_THREADS = 4
"""numpy's BLAS threads while a GPU engine works on the CPU (Silero's network, the log-mel). Their
products are small, and OpenBLAS's threads, one per core, spin between them and hold the cores
that the frontends' own blocks need; 4 was the fastest count measured
(docs/PERFORMANCE.md: host BLAS threads). The numpy backend sets its own (``engine.cpu.ops``)."""


ENCODER_BATCH_BYTES = 2 * 2**30
"""Memory the windows of one batched encoder pass may take (``Engine.transcribe_many``): the batch is
the one asked for, or as many windows as fit in this by the family's ``window_bytes``. Fits beside
any model on a GPU that holds whisper-large-v3's weights (docs/PERFORMANCE.md: encoder batches)."""


class Cancelled(SaysoError):
    """The caller cancelled a transcription (``cancel`` event set)."""

    def __init__(self) -> None:
        super().__init__("Transcription cancelled.")


@dataclass
class _FileRun:
    """One audio's transcription as its pieces are done: the segments so far, the language after them
    (the next piece's), and how far in the pieces reach."""

    language: str | None
    total: float = 0.0  # seconds, by the header; 0 when it doesn't say
    segments: list[Segment] = field(default_factory=list)
    duration: float = 0.0

    def add(self, found: list[Segment], language: str | None, offset: float, piece: np.ndarray,
            progress: Progress | None) -> None:
        self.segments.extend(found)
        self.language = language
        self.duration = offset + len(piece) / SAMPLE_RATE
        if progress is not None and self.total > 0:
            progress(min(1.0, self.duration / self.total))


class Engine:
    """A model loaded on a backend. One thread (the app's engine thread) owns it; a stream session's
    own thread takes turns with it (``lock``), one piece of audio at a time.

    ``vad``: detect speech with Silero VAD (fetched from PyPI on first use): a piece without speech is
    skipped, one with speech is heard from just before it; without it every piece goes to the model
    whole, silence and all.

    ``fallback``: what happens when the GPU fails, loading or in the middle of a piece (``Fallback``:
    the model moves to the CPU and the piece runs again there, or the error is raised); the app
    shares one among the engines of a loaded model, and its device is the one opened. By default ``Fallback(device)``.
    """

    def __init__(self, model: str | Path | None = None, device: DeviceChoice = "auto",
                 notify: Callable[[str], None] | None = None, vad: bool = True, fallback: Fallback | None = None):
        heap.keep_large_blocks()  # the VAD's arrays, and the numpy backend's, reused call after call
        progress = (lambda fraction, message: notify(message)) if notify else None
        path = models.resolve(model, progress) if model else models.default_model(progress)
        self.fallback = fallback or Fallback(device)
        device = self.fallback.device
        # The backend opens on threads of its own while this one reads the model file's header and
        # loads the model: wgpu-native picks the adapter, then creates the GPU device (most of it the
        # Vulkan driver's start, the longest step of a load) without holding the GIL, and the
        # weights' copies wait for it on threads of their own (``engine.gpu.tensors.ModelUpload``).
        # wgpu's modules are imported first, here, while its instance is created
        # (``engine.gpu.instance``), the kernels' after the header (``import_gpu_backend``).
        import_gpu_backend(device, "device")
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-load") as background:
            opened = background.submit(make_ops, device, path)
            self.model_file = ModelFile(path)
            families.family(self.model_file)  # its modules import while the device opens, too
            import_gpu_backend(device, "ops")
            try:
                ops = opened.result()
                with ops.errors("loading the model"):
                    self._load_model(ops)
            except GpuError as error:
                self._load_model(self.fallback.cpu_ops(error))
        self.model_name = self.transcriber.name
        # Silero's weights load once the model's have, on a thread of their own: beside the model
        # file's header both were Python work under one GIL, and Silero's lengthened the load.
        # The first piece of audio waits for them if it comes sooner.
        self._vad_loaded: Future | None = None
        if vad:  # not a daemon: a first start fetches the model, which exiting must not cut short
            self._vad_loaded = in_background(partial(self._load_vad, notify), "engine-vad", daemon=False)
        self.lock = threading.RLock()
        self.backend_serial = 0  # counts moves to the CPU: what a stream keeps for a backend is kept for one
        self.pass_seconds = 0.0  # how long the last stream pass took: whether passes can keep up (engine.stream)

    @property
    def vad(self) -> SileroModel | None:
        """Silero VAD's model, once loaded; None when this engine doesn't detect speech."""
        return None if self._vad_loaded is None else self._vad_loaded.result()

    @staticmethod
    def _load_vad(notify) -> SileroModel | None:
        """Silero VAD, or None with a warning when its model file can't be read (a damaged install):
        transcription still works, it just hears the silences too."""
        try:
            return SileroModel.shared()
        except SaysoError as error:
            message = f"Voice activity detection is off: {error}"
            log.warning(message)
            if notify is not None:
                notify(message)
            return None

    def describe(self) -> str:
        return f"{self.model_name} on {self.ops.describe()}"

    def transcribe(self, pcm: np.ndarray, language: str | None = None, task: str = "transcribe",
                   prompt: str | None = None, progress: Progress | None = None,
                   cancel: threading.Event | None = None) -> Transcript:
        """Transcribe 16 kHz mono float32 samples of any length."""
        self.check_options(language, task)
        pcm = np.asarray(pcm, np.float32).reshape(-1)
        return self._run([pcm], len(pcm) / SAMPLE_RATE, language, task, prompt, progress, cancel)

    def transcribe_file(self, path: str | Path, language: str | None = None, task: str = "transcribe",
                        prompt: str | None = None, progress: Progress | None = None,
                        cancel: threading.Event | None = None) -> Transcript:
        """Transcribe an audio or video file, decoding it as a stream so long files stay in bounded memory;
        the transcript's ``warnings`` say what the decoding repaired or found missing (``audio.Warnings``)."""
        self.check_options(language, task)
        warnings = audio.Warnings()
        transcript = self._run(audio.stream_audio(path, warn=warnings), _header_seconds(path), language, task, prompt,
                               progress, cancel, source=str(path))
        transcript.warnings = list(warnings)
        return transcript

    def stream(self, language: str | None = None, task: str = "transcribe", prompt: str | None = None,
               partials: bool = True, background: bool = True, pause: float = PAUSE_SECONDS):
        """A ``StreamSession`` for a dictation: feed it audio as it is recorded, read the text so far,
        and ``finish`` it for the whole recording's text, most of it transcribed already: the pieces
        its pauses closed were (``engine.stream``)."""
        from sayso.engine.stream import StreamSession

        self.check_options(language, task)
        return StreamSession(self, language, task, prompt, partials=partials, background=background, pause=pause)

    def check_options(self, language: str | None, task: str) -> None:
        """Raise SaysoError, before any audio is decoded, when this model can't do ``task`` in ``language``."""
        t = self.transcriber
        check_options(self.model_name, t.languages, t.can_translate, language, task)

    def speech_vad(self, pause: float = PAUSE_SECONDS) -> Vad | None:
        """A fresh ``Vad`` for one piece of audio, or None when this engine doesn't detect speech."""
        return None if self.vad is None else Vad(pause, model=self.vad)

    def speech_span(self, piece: np.ndarray) -> Span | None:
        """The samples of ``piece`` that go to the model and where its speech begins (``engine.vad``;
        None: no speech), or all of it without VAD."""
        if self.vad is None:
            return Span(0, len(piece), 0) if len(piece) else None
        return self._heard(piece).span()

    @property
    def speech_at(self) -> Callable[[np.ndarray], list[tuple[int, int]]] | None:
        """The voice detector for a family that reads on past a pause (``engine.families``: ``speech_at``),
        or None when this engine doesn't detect speech."""
        return None if self.vad is None else self._speech_in

    def _speech_in(self, samples: np.ndarray) -> list[tuple[int, int]]:
        """The speech in ``samples`` as (start, end) sample indices (``Vad.segments``)."""
        return self._heard(samples).segments()

    def _heard(self, samples: np.ndarray) -> Vad:
        """A fresh ``Vad`` (``speech_vad``) fed ``samples`` (this engine detects speech)."""
        vad = self.speech_vad()
        with self._host_work():
            vad.feed(samples)
        return vad

    def _host_work(self) -> AbstractContextManager:
        """Where this engine's work on the CPU runs beside a GPU's: BLAS on ``HOST_BLAS_THREADS``."""
        return blas_threads(HOST_BLAS_THREADS) if self.ops.runs_beside_host else nullcontext()

    def transcribe_piece(self, piece: np.ndarray, offset: float, span: Span | None,
                         language: str | None, task: str, prompt: str | None,
                         features=None, interrupt: threading.Event | None = None,
                         encoded=None) -> tuple[list[Segment], str | None]:
        """Segments (in seconds from the start of the audio) of ``piece[span.start:span.end]``, one piece
        that starts ``offset`` seconds in, and the language after it; no time in them comes more than
        ``ONSET_MARGIN`` before the speech (a model may date its first words to its window's start).
        ``features``: the family's keeper of frontend frames for audio that starts at ``span.start``;
        ``interrupt``: stops the work with ``errors.Interrupted`` once set; ``encoded``: the piece's
        first window encoded already (``transcribe_many``). Each goes to the family only if it takes it
        (``Transcriber.stream_hooks``)."""
        if span is None:
            return [], language
        start, end, speech = span
        given = {"features": features, "interrupt": interrupt, "encoded": encoded, "speech_at": self.speech_at}
        hooks = self.transcriber.stream_hooks
        extra = {name: value for name, value in given.items() if value is not None and name in hooks}
        segments, language = self._on_backend(
            lambda: self.transcriber.transcribe(piece[start:end], offset=offset + start / SAMPLE_RATE,
                                                language=language, task=task, prompt=prompt, **extra),
            # Again on the CPU, without the features or the window kept on the GPU; an interrupt still applies.
            lambda: self.transcribe_piece(piece, offset, span, language, task, prompt, None, interrupt))
        _after_onset(segments, offset + start / SAMPLE_RATE, speech - start)
        return segments, language

    def transcribe_window(self, state, window: np.ndarray, offset: float, speech: int,
                          encoded=None) -> tuple[list[Segment], int]:
        """Segments of the window that starts ``offset`` seconds into the audio (``window``: its samples,
        its speech from sample ``speech`` on), and the samples from its start to where the next window
        starts; ``state``: the family's ``long_form``, moved on to the next window. ``encoded``: the
        window encoded already (``transcribe_many``)."""
        given = {"encoded": encoded, "speech_at": self.speech_at}
        extra = {name: value for name, value in given.items() if value is not None}
        segments, seek = self._on_backend(
            lambda: self.transcriber.transcribe_window(state, window, offset, **extra),
            lambda: self.transcribe_window(state, window, offset, speech))  # the GPU's window is gone
        _after_onset(segments, offset, speech)
        return segments, seek

    def _on_backend(self, work: Callable[[], Any], again: Callable[[], Any]) -> Any:
        """``work()`` on this engine's backend; after the GPU failed, ``again()`` once the model is on the
        CPU (``Fallback``'s rule)."""
        ops = self.ops
        try:
            with self.lock, ops.errors("transcribing"), self._host_work():
                return work()
        except GpuError as error:
            self._move_to_cpu(ops, error)
            return again()
        except NonFiniteOutput as error:
            raise ModelFileError(self.model_file.path, f"is damaged: from finite audio, the model's {error.what} "
                                 "came out as NaN or infinity") from None

    def _load_model(self, ops: Backend) -> None:
        """The model file's transcriber on ``ops``, which becomes this engine's backend."""
        self.ops = ops
        self.transcriber = families.load(self.model_file, ops)

    def _move_to_cpu(self, failed: Backend, error: GpuError) -> None:
        """After ``failed`` (this engine's backend when the work began) raised ``error``: the model on the
        CPU backend, by ``Fallback``'s rule (which raises ``error`` where it doesn't fall back). Another
        thread may have moved it already (a stream's passes and the engine thread take turns)."""
        with self.lock:
            if self.ops is not failed:
                return
            self._load_model(self.fallback.cpu_ops(error))
            self.backend_serial += 1
        failed.close()

    def make_transcript(self, segments: list[Segment], language: str | None, duration: float) -> Transcript:
        text = " ".join(s.text.strip() for s in segments if s.text.strip())
        return Transcript(text=text, segments=segments, language=language or "", duration=duration, model=self.model_name)

    def _run(self, chunks: Iterable[np.ndarray], total: float, language, task, prompt, progress, cancel,
             source: str = "the audio") -> Transcript:
        if self.reads_windows:
            windows = Windows((audio.sanitized(chunk, source) for chunk in chunks), self.transcriber.window_seconds)
            return self._read_windows(windows, _FileRun(language, total), task, prompt, progress, cancel)
        run = _FileRun(language, total)
        for offset, piece in self._pieces(chunks, source):
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            found, language = self.transcribe_piece(piece, offset, self.speech_span(piece), run.language, task, prompt)
            run.add(found, language, offset, piece, progress)
        if progress is not None:
            progress(1.0)
        return self.make_transcript(run.segments, run.language, run.duration)

    @property
    def reads_windows(self) -> bool:
        """Whether the family reads long audio window after window, each where the text of the one before
        ended (``long_form``: Whisper), rather than in pieces cut at quiet moments."""
        return hasattr(self.transcriber, "long_form")

    def _read_windows(self, windows: Windows, run: _FileRun, task: str, prompt: str | None,
                      progress: Progress | None, cancel: threading.Event | None,
                      first: tuple[np.ndarray, int, Any] | None = None) -> Transcript:
        """The transcript of ``windows``' audio, read window after window (``engine.windows``); ``first``:
        its first window with speech as ``_speech_window`` found it, and that window encoded."""
        state = self.transcriber.long_form(run.language, task, prompt)
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            if first is None:
                found = self._speech_window(windows)
                if found is None:
                    break
                first = (*found, None)
            (window, speech, encoded), first = first, None
            offset = windows.start / SAMPLE_RATE
            found, seek = self.transcribe_window(state, window, offset, speech, encoded)
            run.add(found, state.language, offset, window[:seek], progress)
            windows.advance(seek)
        run.duration = windows.end / SAMPLE_RATE
        if progress is not None:
            progress(1.0)
        return self.make_transcript(run.segments, run.language, run.duration)

    def _speech_window(self, windows: Windows) -> tuple[np.ndarray, int] | None:
        """The next window to decode, and the sample of it where its speech begins: voice detection only
        says where there is none, and the windows move past that (to ``CONTEXT_BEFORE`` before the
        speech: a soft first word); None at the end of the audio."""
        while len(window := windows.current()) >= MIN_WINDOW:
            span = self.speech_span(window)
            if span is None:
                windows.advance(len(window))
            elif span.start > 0:
                windows.advance(span.start)
                return windows.current(), span.speech - span.start
            else:
                return window, span.speech
        return None

    def _pieces(self, chunks: Iterable[np.ndarray], source: str) -> Iterator[tuple[float, np.ndarray]]:
        """(offset in seconds, samples) of the pieces of audio the model takes one window at a time."""
        window = self.transcriber.window_seconds
        return pieces((audio.sanitized(chunk, source) for chunk in chunks), max_seconds=window)

    def transcribe_many(self, paths: Iterable[str | Path], language: str | None = None, task: str = "transcribe",
                        prompt: str | None = None, batch: int | None = None,
                        progress: Callable[[Path, float], None] | None = None,
                        cancel: threading.Event | None = None) -> Iterator[tuple[Path, Transcript | AudioError]]:
        """Transcribe audio or video files, yielding for each in order, as soon as it is done, its
        transcript (``transcribe_file``'s, to the letter) or the ``AudioError`` that made it fail (not
        audio, damaged, empty). ``progress(path, fraction)`` as a file's pieces are done.

        ``batch``: windows the encoder takes in one pass (``encoder_batch``: 1 unless asked, as many as
        memory allows): the first windows of the next ``batch`` files; a family that encodes one window at
        a time, or a batch of 1, transcribes the files one after the other. A file's later windows start
        where the text of the one before ended, so each is encoded alone once that one is decoded, as
        file by file. Windows encoded on a GPU that failed before they were decoded are encoded again on
        the CPU.
        """
        self.check_options(language, task)
        batch = self.encoder_batch(batch)
        paths = iter(map(Path, paths))
        if batch <= 1 or not self.reads_windows:
            for path in paths:
                report = partial(progress, path) if progress else None
                try:
                    yield path, self.transcribe_file(path, language, task, prompt, report, cancel)
                except AudioError as error:
                    yield path, error
            return
        while group := list(islice(paths, batch)):
            starts = [self._first_window(path, cancel) for path in group]
            firsts = [start[1][0] for start in starts if not isinstance(start, AudioError) and start[1] is not None]
            encoded = iter(self._encode_windows(firsts))
            serial = self.backend_serial
            for path, start in zip(group, starts):
                if isinstance(start, AudioError):
                    yield path, start
                    continue
                windows, first = start
                if first is not None:
                    window = next(encoded)
                    first = (*first, window if self.backend_serial == serial else None)  # None: the GPU's is gone
                report = partial(progress, path) if progress else None
                try:
                    yield path, self._read_windows(windows, _FileRun(language, _header_seconds(path)), task, prompt,
                                                   report, cancel, first)
                except AudioError as error:
                    yield path, error

    def _first_window(self, path: Path, cancel: threading.Event | None):
        """``path``'s ``Windows`` and its first window with speech (``_speech_window``; None: it has none),
        or the ``AudioError`` its audio gave."""
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        try:
            windows = Windows((audio.sanitized(chunk, str(path)) for chunk in audio.stream_audio(path)),
                              self.transcriber.window_seconds)
            return windows, self._speech_window(windows)
        except AudioError as error:
            return error

    def encoder_batch(self, asked: int | None = None) -> int:
        """Windows per encoder pass: ``asked`` (1 when None: on the GPUs and CPUs measured, more rows per
        product transcribed no more audio per hour, docs/PERFORMANCE.md: encoder batches), fewer where their
        memory (the family's ``window_bytes``) would pass ``ENCODER_BATCH_BYTES`` or its largest tensor the
        backend's ``max_tensor_bytes``; 1 for a family that encodes one window at a time."""
        if "encoded" not in self.transcriber.stream_hooks:
            return 1
        transcriber = self.transcriber
        return max(1, min(asked or 1, ENCODER_BATCH_BYTES // transcriber.window_bytes,
                          self.ops.max_tensor_bytes // transcriber.window_largest_bytes))

    def _encode_windows(self, pcms: list[np.ndarray]) -> list:
        """The first window of each of ``pcms`` encoded in one pass, or Nones (each then encoded on its own
        by ``transcribe_piece``) when there is one or the GPU failed (the model is then on the CPU)."""
        if len(pcms) <= 1:
            return [None] * len(pcms)
        ops = self.ops
        try:
            with self.lock, ops.errors("transcribing"), self._host_work():
                return self.transcriber.encode_windows(pcms)
        except GpuError as error:
            self._move_to_cpu(ops, error)
            return [None] * len(pcms)

    def close(self) -> None:
        self.ops.close()


def _after_onset(segments: list[Segment], offset: float, speech: int) -> None:
    """No time in ``segments`` more than ``ONSET_MARGIN`` before the speech, which begins ``speech`` samples
    after ``offset`` seconds: a model may date its first words to its window's start."""
    if speech > ONSET_MARGIN * SAMPLE_RATE:
        not_before(segments, offset + speech / SAMPLE_RATE - ONSET_MARGIN)


def _header_seconds(path: Path) -> float:
    """The file's length by its header, 0 when it doesn't say: progress then waits for the end, and a
    file that isn't audio at all fails in the decoding, which says so better than "no length" would."""
    try:
        return audio.duration(path)
    except AudioError:
        return 0.0
