"""The engine on its own thread: one ``Engine`` while the app runs, fed by a priority queue of jobs.

``EngineClient`` is what the GUI holds. It never waits for the engine: it pushes a job and returns at
once the job's handle (``app.core.jobs.JobHandle``), on which that job's started, progress, finished,
failed or cancelled signal comes; the engine's own news (loaded, preview, warning) comes from the client.
``EngineWorker`` lives on a QThread and does the slow parts there: importing and loading the model
(wgpu device, weights), decoding files, transcribing.

Jobs run by priority, not arrival: a dictation (the user is waiting with the cursor in place) goes
ahead of queued history re-runs, which go ahead of file transcriptions. A job already running is not
interrupted, but every job carries a ``threading.Event`` the GUI thread can set to cancel it.

While a dictation is being recorded, the microphone feeds 16 kHz blocks into a queue that the worker
drains every TAKE_TICK_MS into the take's stream session (``engine.stream``). The session transcribes on
its own thread as the words come, and the worker emits ``preview`` (the overlay's "text so far") when
its text changes, and ``speech_ended`` once the speaker has paused (hands-free dictation). At the end
of the take the dictation job (``submit_pcm(..., take=id)``) finishes that session instead of starting
over: its transcript equals transcribing the recording, and most of it is done by then.

When the GPU fails (no adapter, a lost device, out of memory), the engine moves the model to the CPU
backend for as long as the app runs and runs the same piece again there (``engine.backend.Fallback``,
one per loaded model, shared by its engines), so the recording the user made is still transcribed; the
worker only reports it (``warning``, and ``loaded`` with the new description).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from sayso.app.core.jobs import JobHandle
from sayso.engine import FEED_SECONDS, PAUSE_SECONDS, Fallback, SaysoError

log = logging.getLogger(__name__)

PRIORITY_DICTATION = 0
PRIORITY_HISTORY = 1
PRIORITY_FILE = 2

TAKE_TICK_MS = round(FEED_SECONDS * 1000)  # how often the take's new audio goes to its stream session

EngineFactory = Callable[[Path, Fallback], object]


@dataclass(order=True)
class Job:
    """A transcription request: audio given as ``pcm`` (16 kHz mono float32) or as a file ``path``."""

    priority: int
    id: int
    pcm: np.ndarray | None = field(default=None, compare=False)
    path: str | None = field(default=None, compare=False)
    language: str | None = field(default=None, compare=False)
    prompt: str | None = field(default=None, compare=False)
    model: str | None = field(default=None, compare=False)  # None: the loaded model; "": the default one
    take: int | None = field(default=None, compare=False)  # the take whose stream session this job finishes
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


class JobQueue:
    """A thread-safe priority queue of jobs (lowest priority number, then oldest, first)."""

    def __init__(self):
        self._heap: list[Job] = []
        self._lock = threading.Lock()

    def push(self, job: Job) -> None:
        with self._lock:
            heapq.heappush(self._heap, job)

    def pop(self) -> Job | None:
        with self._lock:
            return heapq.heappop(self._heap) if self._heap else None

    def remove(self, job_id: int) -> bool:
        """Take a job out before it started; False if it isn't queued (running, done, unknown)."""
        with self._lock:
            for i, job in enumerate(self._heap):
                if job.id == job_id:
                    self._heap.pop(i)
                    heapq.heapify(self._heap)
                    return True
        return False

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)


def _default_factory(path: Path, fallback):
    from sayso.engine import Engine  # imported here, on the engine thread: it loads wgpu

    return Engine(path, fallback=fallback)


def _resolve_model(model: str, on_progress: Callable) -> Path:
    from sayso.engine import models

    return models.resolve(model, on_progress) if model else models.default_model(on_progress)


class EngineWorker(QObject):
    """Owns the Engine; every slot runs on the engine thread."""

    loading = Signal(str)  # what is happening, for the status line
    loaded = Signal(str, str)  # model name, engine description
    load_failed = Signal(str)
    started = Signal(int)
    progress = Signal(int, float)  # job id, fraction done
    finished = Signal(int, object)  # job id, engine.transcript.Transcript
    failed = Signal(int, str)  # job id, user-facing message
    cancelled = Signal(int)
    preview = Signal(str)  # text of the take so far
    speech_ended = Signal(int)  # take id: the speaker paused after speaking (hands-free dictation stops)
    warning = Signal(str)  # something went wrong but the work goes on (the GPU failed: now on the CPU)

    def __init__(self, jobs: JobQueue, factory: EngineFactory):
        super().__init__()
        self._jobs = jobs
        self._factory = factory
        self._engine = None
        self._engine_path: Path | None = None
        self._load_error: str | None = None
        self._fallback = None  # the loaded model's engine.backend.Fallback, made at each load
        self._reported_serial = 0  # the engine's backend_serial that ``loaded`` last described
        self._other: tuple[Path, object] | None = None  # the last other model used for a history re-run
        self._chunks: queue.SimpleQueue | None = None  # the recording take's blocks, while it records
        self._take: tuple[int, object, dict] | None = None  # (id, stream session, options) of the last take
        self._shown = ""
        self._ended = False
        self._partials = True
        self._take_timer = QTimer(self)  # a child, so it moves to the engine thread with the worker
        self._take_timer.setInterval(TAKE_TICK_MS)
        self._take_timer.timeout.connect(self._take_tick)

    # ---- the model ----------------------------------------------------------------------------------

    @Slot(str, str)
    def load(self, model: str, device: str) -> None:
        self._drop_take()
        self._close_engines()
        self._load_error = None
        self._fallback = Fallback(device, self._on_fallback)
        self.loading.emit("Loading model…")
        try:
            path = _resolve_model(model, self._on_model_progress)
            self.loading.emit(f"Loading {path.stem}…")
            self._engine = self._open(path)
            self._engine_path, self._reported_serial = path, 0
        except SaysoError as error:
            self._fail_load(str(error))
        except Exception as error:  # an engine bug must not kill the thread; show it and keep going
            log.exception("engine: loading failed")
            self._fail_load(f"The model could not be loaded: {error}")
        else:
            self.loaded.emit(self._engine.model_name, self._engine.describe())
        self._drain()

    def _open(self, path: Path):
        """An engine for ``path`` under the loaded model's fallback rule."""
        return self._factory(path, self._fallback)

    def _on_fallback(self, message: str) -> None:
        """The engine left the GPU (on this thread or a take's): say so, and what it now runs on."""
        log.warning("engine: %s", message)
        self.warning.emit(message)

    def _fail_load(self, message: str) -> None:
        self._engine, self._engine_path, self._load_error = None, None, message
        self.load_failed.emit(message)

    def _on_model_progress(self, fraction: float, message: str) -> None:
        """Progress of a model's first-time download and conversion."""
        self.loading.emit(f"{message} {fraction:.0%}" if message else f"Preparing the model… {fraction:.0%}")

    def _engine_for(self, job: Job):
        """The loaded model's engine, or a second one for a job that names another model."""
        if job.model is None:
            return self._engine
        path = _resolve_model(job.model, self._on_model_progress)
        if path == self._engine_path:
            return self._engine
        if self._other is None or self._other[0] != path:
            if self._other is not None:
                self._other[1].close()
                self._other = None
            self._other = (path, self._open(path))
        return self._other[1]

    def _report_move(self) -> None:
        """``loaded`` again once the loaded model's engine has moved to the CPU during a job."""
        if self._engine is not None and self._engine.backend_serial != self._reported_serial:
            self._reported_serial = self._engine.backend_serial
            self.loaded.emit(self._engine.model_name, self._engine.describe())

    def _close_engines(self) -> None:
        for engine in (self._engine, self._other[1] if self._other else None):
            if engine is not None:
                engine.close()
        self._engine, self._engine_path, self._other = None, None, None

    @Slot()
    def shutdown(self) -> None:
        self._drop_take()
        self._close_engines()

    # ---- jobs ---------------------------------------------------------------------------------------

    @Slot()
    def wake(self) -> None:
        self._drain()

    def _drain(self) -> None:
        if self._engine is None and self._load_error is None:
            return  # still loading: the jobs wait in the queue
        while (job := self._jobs.pop()) is not None:
            self._run(job)

    def _run(self, job: Job) -> None:
        if job.cancel.is_set():
            self.cancelled.emit(job.id)
            return
        if self._load_error is not None and job.model is None:
            self.failed.emit(job.id, self._load_error)
            return
        self.started.emit(job.id)
        last = [-1.0]

        def on_progress(fraction: float) -> None:
            if fraction - last[0] >= 0.01 or fraction >= 1.0:
                last[0] = fraction
                self.progress.emit(job.id, float(fraction))

        options = dict(language=job.language, prompt=job.prompt, progress=on_progress, cancel=job.cancel)
        try:
            engine = self._engine_for(job)
            session = self._claim_take(job)
            if session is not None:
                session.feed(job.pcm[session.samples :])  # the blocks that reached the recording after the last tick
                transcript = session.finish()
                on_progress(1.0)
            elif job.pcm is not None:
                transcript = engine.transcribe(job.pcm, **options)
            else:  # decoded as a stream on this thread, so a long video never sits in memory whole
                transcript = engine.transcribe_file(job.path, **options)
        except Exception as error:
            self._report_move()
            if job.cancel.is_set():
                self.cancelled.emit(job.id)
            elif isinstance(error, SaysoError):
                self.failed.emit(job.id, str(error))
            else:
                log.exception("engine: job %d failed", job.id)
                self.failed.emit(job.id, f"Transcription failed: {error}")
            return
        self._report_move()
        if job.cancel.is_set():
            self.cancelled.emit(job.id)
            return
        if not transcript.model:
            transcript.model = engine.model_name
        self.finished.emit(job.id, transcript)

    # ---- the take being recorded --------------------------------------------------------------------

    @Slot(int, object, object)
    def begin_take(self, take: int, chunks: queue.SimpleQueue, options: dict) -> None:
        """Open a stream session for the take (options: language, prompt, partials, pause)."""
        self._drop_take()
        if self._engine is None:
            return  # no model yet: the take is transcribed as a whole when it ends
        language, prompt = options.get("language"), options.get("prompt")
        session = self._engine.stream(language=language, prompt=prompt, partials=options.get("partials", True),
                                      pause=options.get("pause", PAUSE_SECONDS))
        self._chunks, self._take = chunks, (take, session, dict(language=language, prompt=prompt))
        self._shown, self._ended = "", False
        self._partials = session.partials
        self._take_timer.start()

    @Slot()
    def end_take(self) -> None:
        """The recording stopped: no more blocks or previews; the session waits for its dictation job."""
        self._take_timer.stop()
        self._chunks = None

    def _take_tick(self) -> None:
        chunks = self._chunks
        if chunks is None or self._take is None:
            return
        blocks = []
        while True:
            try:
                blocks.append(chunks.get_nowait())
            except queue.Empty:
                break
        take, session, _ = self._take
        if blocks:
            session.feed(np.concatenate(blocks))
        text = session.text  # a pass may have ended since the last tick, with or without new audio
        if self._partials and text != self._shown:
            self._shown = text
            self.preview.emit(text)
        if session.status.ended and not self._ended:
            self._ended = True
            self.speech_ended.emit(take)
        if len(self._jobs):  # the session transcribes on its own thread; queued work goes on meanwhile
            self._drain()

    def _claim_take(self, job: Job):
        """The stream session that ``job`` finishes, if it is the take's and was fed a start of its audio."""
        if job.take is None or self._take is None or self._take[0] != job.take:
            return None
        _, session, options = self._take
        self._take = None
        if self._chunks is not None:  # the recording's end raced ahead of end_take
            self.end_take()
        if job.model is not None or options != dict(language=job.language, prompt=job.prompt) \
                or session.samples > len(job.pcm):
            session.close()
            return None
        return session

    def _drop_take(self) -> None:
        self.end_take()
        if self._take is not None:
            self._take[1].close()
            self._take = None


class EngineClient(QObject):
    """The GUI side: starts the engine thread and offers non-blocking calls; re-emits the worker's news
    of the engine, and each job's on that job's handle."""

    loading = Signal(str)
    loaded = Signal(str, str)
    load_failed = Signal(str)
    preview = Signal(str)
    speech_ended = Signal(int)
    warning = Signal(str)

    _load = Signal(str, str)
    _wake = Signal()
    _begin_take = Signal(int, object, object)
    _end_take = Signal()
    _shutdown = Signal()

    def __init__(self, factory: EngineFactory | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs = JobQueue()
        self._ids = itertools.count(1)
        self._handles: dict[int, JobHandle] = {}  # the jobs not ended yet, by id: where their signals go
        self._takes = itertools.count(1)
        self._take: int | None = None  # the take being recorded
        self.model_name = ""
        self.description = ""
        self.load_error: str | None = None
        self.ready = False

        self._thread = QThread()
        self._thread.setObjectName("sayso-engine")
        self._worker = EngineWorker(self._jobs, factory or _default_factory)
        self._worker.moveToThread(self._thread)
        self._load.connect(self._worker.load)
        self._wake.connect(self._worker.wake)
        self._begin_take.connect(self._worker.begin_take)
        self._end_take.connect(self._worker.end_take)
        self._shutdown.connect(self._worker.shutdown)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.load_failed.connect(self._on_load_failed)
        for name in ("loading", "preview", "speech_ended", "warning"):
            getattr(self._worker, name).connect(getattr(self, name))
        self._worker.started.connect(self._on_started)
        self._worker.progress.connect(self._on_progress)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        self._worker.cancelled.connect(self._on_cancelled)
        self._thread.start()

    def _on_loaded(self, name: str, description: str) -> None:
        self.ready, self.model_name, self.description, self.load_error = True, name, description, None
        self.loaded.emit(name, description)

    def _on_load_failed(self, message: str) -> None:
        self.ready, self.model_name, self.description, self.load_error = False, "", "", message
        self.load_failed.emit(message)

    def _on_started(self, job_id: int) -> None:
        self._handles[job_id].started.emit()

    def _on_progress(self, job_id: int, fraction: float) -> None:
        self._handles[job_id].progress.emit(fraction)

    # A job's last signal lets its handle go. The handle is held in a name until the signal is out: a bound
    # signal doesn't keep its object alive, and a handle nobody else holds would be deleted before it emitted.

    def _on_finished(self, job_id: int, transcript) -> None:
        job = self._handles.pop(job_id)
        job.finished.emit(transcript)

    def _on_failed(self, job_id: int, message: str) -> None:
        job = self._handles.pop(job_id)
        job.failed.emit(message)

    def _on_cancelled(self, job_id: int) -> None:
        job = self._handles.pop(job_id)
        job.cancelled.emit()

    def load(self, model: str = "", device: str = "auto") -> None:
        """(Re)load the app's model on the engine thread; ``model`` "" means the default model."""
        self.ready = False
        self._load.emit(model, device)

    def submit_pcm(self, pcm: np.ndarray, *, priority: int = PRIORITY_DICTATION, **options) -> JobHandle:
        """Queue 16 kHz mono audio; options: language, prompt, model, take (the id ``end_take`` returned,
        whose stream session then gives the transcript). Returns the job's handle."""
        return self._submit(Job(priority, next(self._ids), pcm=np.asarray(pcm, np.float32), **options))

    def submit_file(self, path, *, priority: int = PRIORITY_FILE, **options) -> JobHandle:
        """Queue an audio or video file (decoded on the engine thread). Returns the job's handle."""
        return self._submit(Job(priority, next(self._ids), path=str(path), **options))

    def _submit(self, job: Job) -> JobHandle:
        handle = self._handles[job.id] = JobHandle(job.id, partial(self._cancel, job.id, job.cancel))
        self._jobs.push(job)
        self._wake.emit()
        return handle

    def _cancel(self, job_id: int, cancel: threading.Event) -> None:
        """A queued job is dropped at once; a running one stops at the engine's next check of ``cancel``."""
        if self._jobs.remove(job_id):
            self._on_cancelled(job_id)
        else:
            cancel.set()

    def begin_take(self, **options) -> Callable[[np.ndarray], None]:
        """Start streaming a take into the engine (options: language, prompt, partials: emit ``preview``
        with the text so far, pause: seconds of quiet after speech before ``speech_ended``); returns the
        sink the microphone feeds. The sink is callable from any thread (the microphone calls it from
        PortAudio's)."""
        chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._take = next(self._takes)
        self._begin_take.emit(self._take, chunks, options)
        return chunks.put

    @property
    def take_id(self) -> int | None:
        """The id of the take being streamed (``speech_ended`` carries it), or None."""
        return self._take

    def end_take(self) -> int | None:
        """Stop streaming the take; returns its id for ``submit_pcm(..., take=)`` (None: no take)."""
        take, self._take = self._take, None
        self._end_take.emit()
        return take

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Cancel everything, close the engine on its thread, and stop the thread."""
        for handle in list(self._handles.values()):
            handle.cancel()
        self._shutdown.emit()
        self._thread.quit()
        if not self._thread.wait(timeout_ms):
            log.warning("engine: the engine thread did not stop within %d ms", timeout_ms)
