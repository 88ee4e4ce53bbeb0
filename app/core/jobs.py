"""A transcription job as its submitter sees it: the handle ``EngineClient.submit_*`` returns.

Each handle carries the signals of its own job, so whoever submitted a job hears of that job only:
it connects to the handle (capturing what it needs, an entry, a row) instead of sorting every job's
results by id. A handle lives on the GUI thread; the client emits on it what the engine thread reports,
ending with exactly one of ``finished``, ``failed`` or ``cancelled``, and then lets it go: what connected
to a handle needn't keep it, but whatever uses it after its end (its ``id``, a disconnect) must hold it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal


class JobHandle(QObject):
    """One submitted job: its ``id``, its signals, and ``cancel``."""

    started = Signal()
    progress = Signal(float)  # fraction done
    finished = Signal(object)  # engine.transcript.Transcript
    failed = Signal(str)  # user-facing message
    cancelled = Signal()

    def __init__(self, job_id: int, cancel: Callable[[], None]):
        super().__init__()
        self.id = job_id
        self._cancel = cancel

    def cancel(self) -> None:
        """Cancel the job: a queued one ends at once (``cancelled``), a running one at the engine's next
        check; one that has ended stays as it ended."""
        self._cancel()
