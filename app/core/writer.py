"""The thread that writes the app's texts (``app.core.writing``): off the GUI thread, since a cleanup
may wait seconds for its server, and one text after the other, so texts come out in the order the
dictations were made."""

from __future__ import annotations

import logging
import queue
import threading

from PySide6.QtCore import QObject, Signal

from sayso.app.core.text.cleanup import Cleanup
from sayso.app.core.text.pipeline import TextRules
from sayso.app.core.writing import Written, write_text

log = logging.getLogger(__name__)


class TextWriter(QObject):
    """Writes texts on its own thread, in the order asked; each ``write`` ends with one ``written``."""

    written = Signal(object)  # Written

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def write(self, key, raw: str, rules: TextRules, cleanup: Cleanup | None) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(self._queue,), name="sayso-writer", daemon=True)
            self._thread.start()
        self._queue.put((key, raw, rules, cleanup))

    def _run(self, items: queue.SimpleQueue) -> None:
        while (item := items.get()) is not None:
            key, raw, rules, cleanup = item
            try:
                text, note = write_text(raw, rules, cleanup)
            except Exception as error:  # a rule's bug must not lose the dictation: the engine's words go out
                log.exception("text rules failed")
                text, note = raw.strip(), f"Written as heard: the text rules failed ({error})."
            self.written.emit(Written(key, raw, text, note))

    def stop(self) -> None:
        """Let the thread end after what is queued (a cleanup under way ends by its timeout)."""
        if self._thread is not None:
            self._queue.put(None)
            self._queue, self._thread = queue.SimpleQueue(), None
