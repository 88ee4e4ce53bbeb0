"""The Files page: drop or choose audio/video files, watch them transcribe, read and export the results.

Every file becomes a job on the engine thread (lowest priority, so dictation never waits behind a long
file that hasn't started); each row shows the file's progress and a cancel button. Selecting a finished
row shows its transcript with timestamps; Export writes TXT, SRT, VTT or JSON through engine.formats.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.core.engine_worker import EngineClient
from sayso.app.core.jobs import JobHandle
from sayso.app.core.settings import Settings
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import Card, ElidedLabel, ListAndDetail, PageHeader, format_duration, icon_button, label
from sayso.engine import MEDIA_SUFFIXES, render

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("txt", "srt", "vtt", "json")
_FILTER = "Audio and video (" + " ".join(f"*{s}" for s in sorted(MEDIA_SUFFIXES)) + ");;All files (*)"


def media_files(paths: list[Path]) -> list[Path]:
    """Files as given, and the audio/video files inside any folder among them (sorted)."""
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MEDIA_SUFFIXES)
        elif path.is_file():
            found.append(path)
    return found


@dataclass
class FileJob:
    path: Path
    handle: JobHandle
    status: str = "queued"  # queued | running | done | failed | cancelled
    progress: float = 0.0
    transcript: object = None
    error: str = ""
    duration: float | None = None


class FileRow(QWidget):
    """One queued file: name, status line, progress bar, and a cancel (or remove) button."""

    cancel_clicked = Signal()

    def __init__(self, job: FileJob):
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 8, 6, 8)
        row.setSpacing(10)
        icon = QLabel()
        icon.setPixmap(assets.pixmap("files", COLORS["accent"], 20))
        row.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        column = QVBoxLayout()
        column.setSpacing(4)
        self.name = ElidedLabel(job.path.name, mode=Qt.TextElideMode.ElideMiddle)
        self.name.setStyleSheet("font-weight: 600;")
        self.name.setToolTip(str(job.path))
        self.status = label("", "Muted")
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        column.addWidget(self.name)
        column.addWidget(self.status)
        column.addWidget(self.bar)
        row.addLayout(column, 1)
        self.button = icon_button("close", "Cancel")
        self.button.clicked.connect(self.cancel_clicked)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignTop)
        self.update_from(job)

    def update_from(self, job: FileJob) -> None:
        length = f" · {format_duration(job.duration)}" if job.duration else ""
        texts = {
            "queued": f"Waiting{length}",
            "running": f"Transcribing {job.progress:.0%}{length}",
            "done": f"Done{length} · {len(getattr(job.transcript, 'segments', []))} segments",
            "failed": job.error,
            "cancelled": "Cancelled",
        }
        self.status.setText(texts[job.status])
        self.status.setObjectName("Error" if job.status == "failed" else "Muted")
        self.status.setStyleSheet("")  # re-polish for the new object name
        self.status.setWordWrap(job.status == "failed")
        self.bar.setVisible(job.status in ("queued", "running"))
        self.bar.setValue(int(job.progress * 1000))
        finished = job.status in ("done", "failed", "cancelled")
        self.button.setToolTip("Remove from the list" if finished else "Cancel")


def _timestamp(seconds: float) -> str:
    minutes, secs = divmod(max(seconds, 0.0), 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}:{minutes:02d}:{secs:04.1f}" if hours else f"{minutes}:{secs:04.1f}"


def transcript_html(transcript) -> str:
    """Segments as a two-column table: start → end in muted tabular digits, then the text."""
    rows = "".join(
        f'<tr><td style="color:{COLORS["muted"]}; padding:4px 14px 4px 0; white-space:nowrap;">'
        f"{_timestamp(s.start)} → {_timestamp(s.end)}</td>"
        f'<td style="padding:4px 0;">{html.escape(s.text.strip())}</td></tr>'
        for s in transcript.segments
    )
    return f'<table cellspacing="0" style="font-size:10.5pt;">{rows}</table>'


class FilesPage(QWidget):
    def __init__(self, client: EngineClient, settings: Callable[[], Settings], parent: QWidget | None = None):
        super().__init__(parent)
        self._client = client
        self._settings = settings
        self._jobs: dict[int, FileJob] = {}
        self._rows: dict[int, QListWidgetItem] = {}

        column = QVBoxLayout(self)
        column.setContentsMargins(28, 24, 28, 24)
        column.setSpacing(16)
        header = PageHeader("Files", "Transcribe recordings, meetings and videos. Everything stays on this computer.")
        self.open_button = QPushButton(assets.icon("folder", "#FFFFFF", 16), "Open files…")
        self.open_button.setObjectName("Primary")
        self.open_button.clicked.connect(self.choose_files)
        header.actions.addWidget(self.open_button)
        column.addWidget(header)

        self.drop_zone = QFrame()
        self.drop_zone.setObjectName("DropZone")
        zone = QHBoxLayout(self.drop_zone)
        zone.setContentsMargins(18, 14, 18, 14)
        zone.setSpacing(12)
        zone.addStretch(1)
        arrow = QLabel()
        arrow.setPixmap(assets.pixmap("upload", COLORS["accent"], 22))
        zone.addWidget(arrow)
        zone_text = QVBoxLayout()
        zone_text.setSpacing(0)
        zone_text.addWidget(label("Drop audio or video files here", "CardTitle"))
        zone_text.addWidget(label("wav, mp3, flac, ogg, m4a, mp4, mkv, webm, … any length", "Muted", wrap=True))
        zone.addLayout(zone_text)
        zone.addStretch(1)
        column.addWidget(self.drop_zone)

        splitter = ListAndDetail(self._show_selected)
        self.queue = splitter.list

        result = Card()
        self.result_title = ElidedLabel("No transcript yet", "CardTitle", mode=Qt.TextElideMode.ElideMiddle)
        result.header.addWidget(self.result_title, 1)
        self.copy_button = QPushButton(assets.icon("copy", COLORS["muted"], 16), "Copy")
        self.copy_button.clicked.connect(self._copy)
        result.header.addWidget(self.copy_button)
        result.body.addLayout(result.header)
        self.result_meta = label("Transcripts appear here with their timestamps.", "Muted")
        result.body.addWidget(self.result_meta)
        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        self.view.setFrameShape(QFrame.Shape.NoFrame)
        self.view.setStyleSheet("QTextBrowser { border: none; padding: 0; }")
        result.body.addWidget(self.view, 1)
        exports = QHBoxLayout()
        exports.setSpacing(8)
        self.export_buttons = {}
        for fmt in EXPORT_FORMATS:  # the export icon says what the chips do: a label beside them left no room
            button = QPushButton(fmt.upper())
            button.setToolTip(f"Export as {fmt.upper()}…")
            button.setObjectName("Chip")
            button.setIcon(assets.icon("export", COLORS["muted"], 14))
            button.setIconSize(QSize(14, 14))
            button.clicked.connect(lambda _=False, f=fmt: self.export_dialog(f))
            exports.addWidget(button)
            self.export_buttons[fmt] = button
        exports.addStretch(1)
        result.body.addLayout(exports)
        splitter.set_detail(result)
        column.addWidget(splitter, 1)

        self._show_selected()

    # ---- queue --------------------------------------------------------------------------------------

    def add_files(self, paths) -> list[int]:
        """Queue files (folders are searched for media); returns the new job ids."""
        ids = []
        settings = self._settings()
        for path in media_files([Path(p) for p in paths]):
            handle = self._client.submit_file(path, language=settings.language or None, prompt=settings.prompt)
            job_id = handle.id
            job = self._jobs[job_id] = FileJob(path, handle, duration=_duration(path))
            handle.started.connect(partial(self._on_started, job_id))
            handle.progress.connect(partial(self._on_progress, job_id))
            handle.finished.connect(partial(self._on_finished, job_id))
            handle.failed.connect(partial(self._on_failed, job_id))
            handle.cancelled.connect(partial(self._on_cancelled, job_id))
            row = FileRow(job)
            row.cancel_clicked.connect(lambda j=job_id: self.cancel_or_remove(j))
            item = QListWidgetItem()
            item.setData(Qt.ItemDataRole.UserRole, job_id)
            item.setSizeHint(row.sizeHint())
            self.queue.addItem(item)
            self.queue.setItemWidget(item, row)
            self._rows[job_id] = item
            ids.append(job_id)
        if ids and self.queue.currentItem() is None:
            self.queue.setCurrentItem(self._rows[ids[0]])
        return ids

    def choose_files(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Transcribe files", str(Path.home()), _FILTER)
        self.add_files(paths)

    def job(self, job_id: int) -> FileJob:
        return self._jobs[job_id]

    def cancel_or_remove(self, job_id: int) -> None:
        job = self._jobs[job_id]
        if job.status in ("queued", "running"):
            job.handle.cancel()
            return
        item = self._rows.pop(job_id)
        self.queue.takeItem(self.queue.row(item))
        del self._jobs[job_id]
        self._show_selected()

    def _update(self, job_id: int) -> None:
        item = self._rows[job_id]
        row = self.queue.itemWidget(item)
        row.update_from(self._jobs[job_id])
        item.setSizeHint(row.sizeHint())
        if item is self.queue.currentItem():
            self._show_selected()

    def _on_started(self, job_id: int) -> None:
        self._jobs[job_id].status = "running"
        self._update(job_id)

    def _on_progress(self, job_id: int, fraction: float) -> None:
        self._jobs[job_id].progress = fraction
        self._update(job_id)

    def _on_finished(self, job_id: int, transcript) -> None:
        job = self._jobs[job_id]
        job.status, job.progress, job.transcript = "done", 1.0, transcript
        job.duration = job.duration or transcript.duration
        self._update(job_id)

    def _on_failed(self, job_id: int, message: str) -> None:
        self._jobs[job_id].status, self._jobs[job_id].error = "failed", message
        self._update(job_id)

    def _on_cancelled(self, job_id: int) -> None:
        self._jobs[job_id].status = "cancelled"
        self._update(job_id)

    # ---- result -------------------------------------------------------------------------------------

    def selected(self) -> FileJob | None:
        item = self.queue.currentItem()
        return self._jobs.get(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def _show_selected(self) -> None:
        job = self.selected()
        done = job is not None and job.status == "done"
        for button in (*self.export_buttons.values(), self.copy_button):
            button.setEnabled(done)
        self.drop_zone.setMinimumHeight(72 if self._jobs else 150)
        if job is None:
            self.result_title.set_full_text("No transcript yet")
            self.result_meta.setText("Transcripts appear here with their timestamps.")
            self.view.clear()
            return
        self.result_title.set_full_text(job.path.name)
        if done:
            t = job.transcript
            words = len(t.text.split())
            self.result_meta.setText(
                "\n".join([f"{format_duration(t.duration)} · {len(t.segments)} segments · {words} words · {t.model}",
                           *t.warnings])  # what the audio lacked or was repaired of: a half file says so
            )
            self.view.setHtml(transcript_html(t))
        else:
            self.result_meta.setText(
                {"queued": "Waiting for its turn…", "running": "Transcribing…"}.get(job.status, "")
            )
            self.view.setHtml(f'<p style="color:{COLORS["error"]}">{html.escape(job.error)}</p>' if job.error else "")

    def _copy(self) -> None:
        job = self.selected()
        if job is not None and job.transcript is not None:
            QGuiApplication.clipboard().setText(job.transcript.text)

    def export(self, job_id: int, fmt: str, path) -> Path:
        """Write job ``job_id``'s transcript as ``fmt`` (txt, srt, vtt, json) to ``path``."""
        job = self._jobs[job_id]
        text = render(job.transcript, fmt, file=job.path.name)
        Path(path).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        return Path(path)

    def export_dialog(self, fmt: str) -> None:
        job = self.selected()
        if job is None or job.transcript is None:
            return
        suggested = job.path.with_suffix(f".{fmt}")
        path, _ = QFileDialog.getSaveFileName(self, f"Export {fmt.upper()}", str(suggested), f"{fmt.upper()} (*.{fmt})")
        if path:
            try:
                self.export(job.handle.id, fmt, path)
            except OSError as error:
                self.result_meta.setText(f"Couldn't save {path}: {error.strerror or error}")

    # ---- drop zone hover ----------------------------------------------------------------------------

    def set_drop_hover(self, hover: bool) -> None:
        self.drop_zone.setProperty("hover", hover)
        self.drop_zone.style().unpolish(self.drop_zone)
        self.drop_zone.style().polish(self.drop_zone)


def _duration(path: Path) -> float | None:
    from sayso.engine import duration

    try:
        return duration(path)
    except Exception:  # unknown length is fine: the engine reports real problems when it decodes
        return None
