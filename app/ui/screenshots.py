"""``sayso --screenshots DIR``: real screenshots of the running app, for the README and for review.

Waits for the model, then saves:
  main-window.png        the Dictation page, ready
  overlay-recording.png  the floating indicator while recording (levels and words of real speech)
  files-view.png         the Files page with a finished transcript
  history.png, models.png, settings.png
The Files shot transcribes ``--screenshot-audio`` or, without it, the newest recording in History; the
overlay shows that audio's loudness and the first words of its transcript. Nothing is written to History.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from sayso.app.ui.coordinator import Coordinator
from sayso.app.platform.microphone import level_of

log = logging.getLogger(__name__)

TIMEOUT_MS = 15 * 60 * 1000  # converting the default model on first start can take minutes
WINDOW_SIZE = (980, 660)


class ScreenshotTour(QObject):
    def __init__(self, coordinator: Coordinator, out_dir: Path, audio: Path | None):
        super().__init__(coordinator)
        self.c = coordinator
        self.out = Path(out_dir)
        self.audio = audio
        self._job: int | None = None
        self.saved: list[Path] = []

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.c.client.loaded.connect(lambda *_: QTimer.singleShot(300, self._main_window))
        self.c.client.load_failed.connect(lambda message: self._fail(f"the model didn't load: {message}"))
        QTimer.singleShot(TIMEOUT_MS, lambda: self._fail("timed out"))
        self.c.window.resize(*WINDOW_SIZE)
        self.c.window.show()

    def _save(self, widget: QWidget, name: str) -> None:
        QApplication.processEvents()
        path = self.out / name
        widget.grab().save(str(path))
        self.saved.append(path)
        log.info("screenshot: %s", path)

    def _main_window(self) -> None:
        self.c.window.show_page("dictation")
        self._save(self.c.window, "main-window.png")
        audio = self.audio or self._newest_recording()
        if audio is None:
            log.warning("screenshots: no audio to transcribe (give --screenshot-audio); the Files page stays empty")
            self._files_done()
            return
        self.c.window.show_page("files")
        (self._job,) = self.c.files_page.add_files([audio])
        job = self.c.files_page.job(self._job).handle
        for ended in (job.finished, job.failed):
            ended.connect(lambda _: QTimer.singleShot(200, self._files_done))

    def _newest_recording(self) -> Path | None:
        entries = [e for e in self.c.history.search(limit=20) if e.audio_path.exists()]
        return entries[0].audio_path if entries else None

    def _files_done(self) -> None:
        self.c.window.show_page("files")
        self._save(self.c.window, "files-view.png")
        self.c.window.show_page("history")
        self._save(self.c.window, "history.png")
        self.c.window.show_page("models")
        self._save(self.c.window, "models.png")
        self.c.window.show_page("settings")
        self._save(self.c.window, "settings.png")
        self.c.window.show_page("dictation")
        self._overlay()

    def _overlay(self) -> None:
        """The overlay as it looks a few seconds into a take of the transcribed audio."""
        overlay = self.c.overlay
        overlay.show_recording()
        job = self.c.files_page.job(self._job) if self._job is not None else None
        if job is not None and job.transcript is not None:
            from sayso.engine import load_audio

            pcm = load_audio(job.path)[: 16000 * 2]  # the levels of the first two seconds of speech
            for block in np.array_split(pcm, max(1, len(pcm) // 533)):  # 33 ms, as the level poll sees them
                overlay.set_level(level_of(block))
            words = job.transcript.text.split()
            overlay.set_text(" ".join(words[: max(3, len(words) // 2)]))
        else:
            for i in range(60):
                overlay.set_level(0.5 + 0.4 * np.sin(i / 3.0))
        overlay.elapsed.setText("0:04")
        self._save(overlay, "overlay-recording.png")
        overlay.hide()
        QApplication.exit(0)

    def _fail(self, reason: str) -> None:
        log.error("screenshots: %s", reason)
        QApplication.exit(1)
