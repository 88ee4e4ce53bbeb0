"""The engine on its own thread: one ``Engine`` for the whole session, fed by a priority queue of jobs.

``EngineClient`` is what the GUI holds. It never waits for the engine: it pushes a job, returns the job's
id at once, and hears back through signals (loaded, progress, finished, failed, cancelled, preview).
``EngineWorker`` lives on a QThread and does the slow parts there: importing and loading the model
(wgpu device, weights), decoding files, transcribing.

Jobs run by priority, not arrival: a dictation (the user is waiting with the cursor in place) goes
ahead of queued history re-runs, which go ahead of file transcriptions. A job already running is not
interrupted, but every job carries a ``threading.Event`` the GUI thread can set to cancel it.

While a dictation is being recorded, the recorder feeds 16 kHz blocks into a queue the worker drains
every few hundred milliseconds; when the engine is idle it transcribes the end of the take so far and
emits ``preview`` (the overlay's "text so far"). The key-up sets the preview's cancel event, but an
engine only checks it between pieces of audio, so a preview in flight delays the real transcription
until it ends. Previews are therefore sized to the engine's measured speed: each covers only as much of
the take's end as the engine transcribes within PREVIEW_BUDGET, and a slow engine gets none.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from engine.audio import SAMPLE_RATE
from engine.errors import SaysoError

log = logging.getLogger(__name__)

PRIORITY_DICTATION = 0
PRIORITY_HISTORY = 1
PRIORITY_FILE = 2

PREVIEW_TICK_MS = 250
PREVIEW_MIN_SECONDS = 1.0  # don't preview less audio than this: too little for the model to say anything
PREVIEW_MAX_SECONDS = 25.0  # never more than this much of the take's end (Whisper's window is 30 s)
PREVIEW_FIRST_SECONDS = 2.0  # the first preview of a session measures the engine's speed on this much
PREVIEW_BUDGET = 0.4  # seconds one preview may take: the key-up waits for a preview already running
PREVIEW_MIN_GAP = 0.75  # seconds between previews, at least

EngineFactory = Callable[[Path, str], object]


@dataclass(order=True)
class Job:
    """A transcription request: audio given as ``pcm`` (16 kHz mono float32) or as a file ``path``."""

    priority: int
    id: int
    pcm: np.ndarray | None = field(default=None, compare=False)
    path: str | None = field(default=None, compare=False)
    language: str | None = field(default=None, compare=False)
    prompt: str | None = field(default=None, compare=False)
    model: str | None = field(default=None, compare=False)  # None: the session's model; "": the default one
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


def _default_factory(path: Path, device: str):
    from engine.engine import Engine  # imported here, on the engine thread: it loads wgpu

    return Engine(path, device=device)


def _resolve_model(model: str, on_progress: Callable) -> Path:
    from engine import models

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

    def __init__(self, jobs: JobQueue, factory: EngineFactory):
        super().__init__()
        self._jobs = jobs
        self._factory = factory
        self._engine = None
        self._engine_path: Path | None = None
        self._load_error: str | None = None
        self._device = "auto"
        self._other: tuple[Path, object] | None = None  # the last other model used for a history re-run
        self._chunks: queue.SimpleQueue | None = None
        self._take: list[np.ndarray] = []
        self._take_len = 0
        self._previewed_len = 0
        self._preview_cancel: threading.Event | None = None
        self._preview_options: dict = {}
        self._next_preview = 0.0
        self._preview_speed: float | None = None  # compute seconds per second of audio, from the last preview
        self._preview_timer = QTimer(self)  # a child, so it moves to the engine thread with the worker
        self._preview_timer.setInterval(PREVIEW_TICK_MS)
        self._preview_timer.timeout.connect(self._preview_tick)

    # ---- the model ----------------------------------------------------------------------------------

    @Slot(str, str)
    def load(self, model: str, device: str) -> None:
        self._close_engines()
        self._load_error = None
        self._device = device
        self.loading.emit("Loading model…")
        try:
            path = _resolve_model(model, self._on_model_progress)
            self.loading.emit(f"Loading {path.stem}…")
            self._engine = self._factory(path, device)
            self._engine_path = path
        except SaysoError as error:
            self._fail_load(str(error))
        except Exception as error:  # an engine bug must not kill the thread; show it and keep going
            log.exception("engine: loading failed")
            self._fail_load(f"The model could not be loaded: {error}")
        else:
            self.loaded.emit(self._engine.model_name, self._engine.describe())
        self._drain()

    def _fail_load(self, message: str) -> None:
        self._engine, self._engine_path, self._load_error = None, None, message
        self.load_failed.emit(message)

    def _on_model_progress(self, fraction: float, message: str) -> None:
        """Progress of a model's first-time download and conversion."""
        self.loading.emit(f"{message} {fraction:.0%}" if message else f"Preparing the model… {fraction:.0%}")

    def _engine_for(self, job: Job):
        """The session's engine, or a second one for a job that names another model."""
        if job.model is None:
            return self._engine
        path = _resolve_model(job.model, self._on_model_progress)
        if path == self._engine_path:
            return self._engine
        if self._other is None or self._other[0] != path:
            if self._other is not None:
                self._other[1].close()
                self._other = None
            self._other = (path, self._factory(path, self._device))
        return self._other[1]

    def _close_engines(self) -> None:
        for engine in (self._engine, self._other[1] if self._other else None):
            if engine is not None:
                engine.close()
        self._engine, self._engine_path, self._other = None, None, None

    @Slot()
    def shutdown(self) -> None:
        self._preview_timer.stop()
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
            if job.pcm is not None:
                transcript = engine.transcribe(job.pcm, **options)
            else:  # decoded as a stream on this thread, so a long video never sits in memory whole
                transcript = engine.transcribe_file(job.path, **options)
        except Exception as error:
            if job.cancel.is_set():
                self.cancelled.emit(job.id)
            elif isinstance(error, SaysoError):
                self.failed.emit(job.id, str(error))
            else:
                log.exception("engine: job %d failed", job.id)
                self.failed.emit(job.id, f"Transcription failed: {error}")
            return
        if job.cancel.is_set():
            self.cancelled.emit(job.id)
            return
        if not transcript.model:
            transcript.model = engine.model_name
        self.finished.emit(job.id, transcript)

    # ---- live preview of a take ---------------------------------------------------------------------

    @Slot(object, object, object)
    def begin_take(self, chunks: queue.SimpleQueue, cancel: threading.Event, options: dict) -> None:
        self._chunks, self._preview_cancel, self._preview_options = chunks, cancel, options
        self._take, self._take_len, self._previewed_len = [], 0, 0
        self._next_preview = time.monotonic() + PREVIEW_MIN_SECONDS
        self._preview_timer.start()

    @Slot()
    def end_take(self) -> None:
        self._preview_timer.stop()
        self._chunks, self._take, self._take_len = None, [], 0

    def _preview_tick(self) -> None:
        chunks = self._chunks
        if chunks is None:
            return
        while True:
            try:
                block = chunks.get_nowait()
            except queue.Empty:
                break
            self._take.append(block)
            self._take_len += block.size
        if len(self._jobs):  # real work waits: do it first
            self._drain()
            return
        fresh = self._take_len - self._previewed_len
        if (
            self._engine is None
            or self._take_len < PREVIEW_MIN_SECONDS * SAMPLE_RATE
            or fresh < 0.3 * SAMPLE_RATE
            or time.monotonic() < self._next_preview
        ):
            return
        if self._preview_speed is None:
            seconds = PREVIEW_FIRST_SECONDS
        else:
            seconds = min(PREVIEW_MAX_SECONDS, PREVIEW_BUDGET / max(self._preview_speed, 1e-6))
            if seconds < PREVIEW_MIN_SECONDS:
                return  # this engine is too slow to preview without delaying the dictation
        take = np.concatenate(self._take)[-int(PREVIEW_MAX_SECONDS * SAMPLE_RATE) :]
        self._take, self._previewed_len = [take], self._take_len
        pcm = take[-int(seconds * SAMPLE_RATE) :]
        started = time.monotonic()
        try:
            text = self._engine.transcribe(pcm, cancel=self._preview_cancel, **self._preview_options).text
        except Exception as error:  # cancelled by the key-up, or any failure: a preview is best effort
            log.debug("engine: preview stopped: %s", error)
            return
        spent = time.monotonic() - started
        self._preview_speed = spent / (len(pcm) / SAMPLE_RATE)
        # Leave the engine idle at least as long as it worked, so previews take at most half its time.
        self._next_preview = time.monotonic() + max(PREVIEW_MIN_GAP, spent)
        if self._chunks is chunks and not self._preview_cancel.is_set():
            self.preview.emit(text.strip())


class EngineClient(QObject):
    """The GUI side: starts the engine thread and offers non-blocking calls; re-emits the worker's signals."""

    loading = Signal(str)
    loaded = Signal(str, str)
    load_failed = Signal(str)
    started = Signal(int)
    progress = Signal(int, float)
    finished = Signal(int, object)
    failed = Signal(int, str)
    cancelled = Signal(int)
    preview = Signal(str)

    _load = Signal(str, str)
    _wake = Signal()
    _begin_take = Signal(object, object, object)
    _end_take = Signal()
    _shutdown = Signal()

    def __init__(self, factory: EngineFactory | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs = JobQueue()
        self._ids = itertools.count(1)
        self._cancels: dict[int, threading.Event] = {}
        self._take_cancel: threading.Event | None = None
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
        for name in ("loading", "started", "progress", "preview"):
            getattr(self._worker, name).connect(getattr(self, name))
        for name in ("finished", "failed", "cancelled"):
            getattr(self._worker, name).connect(self._forget_job)
            getattr(self._worker, name).connect(getattr(self, name))
        self._thread.start()

    def _on_loaded(self, name: str, description: str) -> None:
        self.ready, self.model_name, self.description, self.load_error = True, name, description, None
        self.loaded.emit(name, description)

    def _on_load_failed(self, message: str) -> None:
        self.ready, self.model_name, self.description, self.load_error = False, "", "", message
        self.load_failed.emit(message)

    def _forget_job(self, job_id: int, *_) -> None:
        self._cancels.pop(job_id, None)

    def load(self, model: str = "", device: str = "auto") -> None:
        """(Re)load the session's model on the engine thread; ``model`` "" means the default model."""
        self.ready = False
        self._load.emit(model, device)

    def submit_pcm(self, pcm: np.ndarray, *, priority: int = PRIORITY_DICTATION, **options) -> int:
        """Queue 16 kHz mono audio; options: language, prompt, model. Returns the job id."""
        return self._submit(Job(priority, next(self._ids), pcm=np.asarray(pcm, np.float32), **options))

    def submit_file(self, path, *, priority: int = PRIORITY_FILE, **options) -> int:
        """Queue an audio or video file (decoded on the engine thread). Returns the job id."""
        return self._submit(Job(priority, next(self._ids), path=str(path), **options))

    def _submit(self, job: Job) -> int:
        self._cancels[job.id] = job.cancel
        self._jobs.push(job)
        self._wake.emit()
        return job.id

    def cancel(self, job_id: int) -> None:
        """Cancel a job: a queued one is dropped at once, a running one stops at the engine's next check."""
        if self._jobs.remove(job_id):
            self._cancels.pop(job_id, None)
            self.cancelled.emit(job_id)
        elif job_id in self._cancels:
            self._cancels[job_id].set()

    def begin_take(self, **options) -> Callable[[np.ndarray], None]:
        """Start previewing a take (options: language, prompt); returns the sink the recorder feeds.

        The sink is callable from any thread (the recorder calls it from PortAudio's).
        """
        chunks: queue.SimpleQueue = queue.SimpleQueue()
        self._take_cancel = threading.Event()
        self._begin_take.emit(chunks, self._take_cancel, options)
        return chunks.put

    def end_take(self) -> None:
        if self._take_cancel is not None:
            self._take_cancel.set()  # stops a preview that is running right now
        self._end_take.emit()

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Cancel everything, close the engine on its thread, and stop the thread."""
        for job_id in list(self._cancels):
            self.cancel(job_id)
        if self._take_cancel is not None:
            self._take_cancel.set()
        self._shutdown.emit()
        self._thread.quit()
        if not self._thread.wait(timeout_ms):
            log.warning("engine: the engine thread did not stop within %d ms", timeout_ms)
