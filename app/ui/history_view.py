"""The History page: search past dictations, copy them, transcribe one again with another model, delete.

Dictations that Sayso stopped before transcribing (it quit, crashed or was killed) are offered at the
top: one button transcribes them all from their kept recordings."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.core.engine_worker import PRIORITY_HISTORY, EngineClient
from sayso.app.core.history import Entry, History
from sayso.app.core.jobs import JobHandle
from sayso.app.core.settings import Settings
from sayso.app.core.writer import TextWriter
from sayso.app.core.writing import Written, cleanup_for, text_rules
from sayso.app.ui.settings_view import available_models
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import Card, ElidedLabel, ListAndDetail, NoticeBar, PageHeader, format_duration, label


def when(created: float, now: float | None = None) -> str:
    """ "Today 14:03", "Yesterday 09:12", "Mon 3 Mar 17:40"."""
    now = time.time() if now is None else now
    day = time.strftime("%Y%m%d", time.localtime(created))
    clock = time.strftime("%H:%M", time.localtime(created))
    if day == time.strftime("%Y%m%d", time.localtime(now)):
        return f"Today {clock}"
    if day == time.strftime("%Y%m%d", time.localtime(now - 86400)):
        return f"Yesterday {clock}"
    return time.strftime("%a %d %b %Y %H:%M", time.localtime(created))


def entry_meta(entry: Entry) -> str:
    parts = [when(entry.created), format_duration(entry.duration)]
    if entry.model:
        parts.append(entry.model)
    return " · ".join(parts)


def _preview(entry: Entry) -> str:
    if entry.status == "transcribing":
        return "Transcribing…"
    if entry.status == "failed":
        return "Not transcribed"
    return " ".join(entry.text.split()) or "(no speech)"


class EntryRow(QWidget):
    def __init__(self, entry: Entry):
        super().__init__()
        column = QVBoxLayout(self)
        column.setContentsMargins(10, 8, 10, 8)
        column.setSpacing(2)
        column.addWidget(ElidedLabel(_preview(entry), "Error" if entry.status == "failed" else ""))
        column.addWidget(ElidedLabel(entry_meta(entry), "Faint"))


class HistoryPage(QWidget):
    entry_changed = Signal(int)

    def __init__(self, history: History, client: EngineClient, settings: Callable[[], Settings], parent=None):
        super().__init__(parent)
        self._history = history
        self._client = client
        self._settings = settings
        self._writer = TextWriter(self)  # a dictation transcribed again is written by the same rules
        self._writer.written.connect(self._on_written)
        self._stopped = False

        column = QVBoxLayout(self)
        column.setContentsMargins(28, 24, 28, 24)
        column.setSpacing(16)
        column.addWidget(PageHeader("History", "Every dictation with its recording, kept on this computer."))
        self.interrupted = NoticeBar()
        self.finish_button = QPushButton(assets.icon("redo", COLORS["muted"], 16), "Transcribe now")
        self.finish_button.clicked.connect(self.transcribe_interrupted)
        self.interrupted.layout().insertWidget(2, self.finish_button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.interrupted.closed.connect(lambda: setattr(self, "_interrupted_dismissed", True))
        self._interrupted_dismissed = False
        column.addWidget(self.interrupted)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search your dictations")
        self.search.addAction(assets.icon("search", COLORS["faint"], 16), QLineEdit.ActionPosition.LeadingPosition)
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(self.refresh)
        self.search.textChanged.connect(self._search_timer.start)
        column.addWidget(self.search)

        splitter = ListAndDetail(self._show_selected)
        self.list = splitter.list

        detail = Card()
        titles = QVBoxLayout()
        titles.setSpacing(0)
        self.title = label("", "CardTitle")
        self.meta = label("", "Muted")
        titles.addWidget(self.title)
        titles.addWidget(self.meta)
        detail.header.addLayout(titles)
        detail.header.addStretch(1)
        self.copy_button = QPushButton(assets.icon("copy", COLORS["muted"], 16), "Copy")
        self.copy_button.clicked.connect(self._copy)
        detail.header.addWidget(self.copy_button)
        self.delete_button = QPushButton(assets.icon("trash", COLORS["error"], 16), "Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        detail.header.addWidget(self.delete_button)
        detail.body.addLayout(detail.header)
        self.error = label("", "Error", wrap=True)
        detail.body.addWidget(self.error)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        detail.body.addWidget(self.text, 1)
        self.heard = label("", "Muted", wrap=True)  # the engine's words, where the text rules changed them
        self.heard.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        detail.body.addWidget(self.heard)
        detail.body.addWidget(label("Transcribe the recording again", "Muted"))
        rerun = QHBoxLayout()
        rerun.setSpacing(8)
        self.model = QComboBox()
        self.model.setToolTip("The model to use")
        rerun.addWidget(self.model, 1)
        self.rerun_button = QPushButton(assets.icon("redo", COLORS["muted"], 16), "Transcribe")
        self.rerun_button.setIconSize(QSize(16, 16))
        self.rerun_button.clicked.connect(lambda: self.retranscribe_selected(self.model.currentData()))
        rerun.addWidget(self.rerun_button)
        detail.body.addLayout(rerun)
        splitter.set_detail(detail)
        self.splitter = splitter
        column.addWidget(splitter, 1)
        self.empty = Card()
        self.empty.body.addStretch(1)
        icon = QLabel()
        icon.setPixmap(assets.pixmap("history", COLORS["faint"], 40))
        icon.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.body.addWidget(icon)
        self.empty_title = label("No dictations yet", "CardTitle")
        self.empty_title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.body.addWidget(self.empty_title)
        self.empty_hint = label("Everything you dictate is kept here with its recording.", "Muted")
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.body.addWidget(self.empty_hint)
        self.empty.body.addStretch(1)
        column.addWidget(self.empty, 1)
        self.refresh_models()
        self.refresh()

    # ---- list ---------------------------------------------------------------------------------------

    def refresh(self, select: int | None = None) -> None:
        """Reload the list (keeping the selection, or selecting entry ``select``)."""
        current = select if select is not None else self.selected_id()
        self.list.blockSignals(True)
        self.list.clear()
        for entry in self._history.search(self.search.text().strip()):
            item = QListWidgetItem()
            item.setData(Qt.ItemDataRole.UserRole, entry.id)
            row = EntryRow(entry)
            item.setSizeHint(row.sizeHint())
            self.list.addItem(item)
            self.list.setItemWidget(item, row)
            if entry.id == current:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.blockSignals(False)
        searching = bool(self.search.text().strip())
        self.splitter.setVisible(self.list.count() > 0)
        self.empty.setVisible(self.list.count() == 0)
        self.empty_title.setText("Nothing found" if searching else "No dictations yet")
        self.empty_hint.setText(
            "No dictation contains that text."
            if searching
            else "Everything you dictate is kept here with its recording."
        )
        self._show_selected()
        self._offer_interrupted()

    def _offer_interrupted(self) -> None:
        count = len(self._history.interrupted())
        if not count or self._interrupted_dismissed:
            self.interrupted.hide()
            return
        dictations = "1 dictation was" if count == 1 else f"{count} dictations were"
        self.interrupted.show_text(f"{dictations} interrupted when Sayso stopped. The recordings are kept.")

    def refresh_models(self) -> None:
        self.model.clear()
        for text, value in available_models():
            self.model.addItem(text, value)
        current = self.model.findData(self._settings().model)
        self.model.setCurrentIndex(max(current, 0))

    def selected_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def _show_selected(self) -> None:
        entry = self._history.get(self.selected_id()) if self.selected_id() is not None else None
        for widget in (self.copy_button, self.delete_button, self.rerun_button, self.model):
            widget.setEnabled(entry is not None)
        if entry is None:
            self.title.setText("")
            self.meta.setText("")
            self.text.setPlainText("")
            self.error.hide()
            self.heard.hide()
            return
        self.title.setText(when(entry.created))
        self.meta.setText(" · ".join(p for p in (format_duration(entry.duration), entry.model) if p))
        self.text.setPlainText(entry.text)
        self.error.setText(entry.error)
        self.error.setVisible(bool(entry.error))
        heard = [f"As heard: {entry.raw_text}"] if entry.raw_text else []
        self.heard.setText("\n".join(heard + ([entry.note] if entry.note else [])))
        self.heard.setVisible(bool(heard or entry.note))
        busy = entry.status == "transcribing"
        self.rerun_button.setEnabled(not busy)
        self.rerun_button.setText("Transcribing…" if busy else "Transcribe")
        self.copy_button.setEnabled(bool(entry.text))

    # ---- actions ------------------------------------------------------------------------------------

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())

    def delete_selected(self) -> None:
        entry_id = self.selected_id()
        if entry_id is not None:
            self._history.delete(entry_id)
            self.refresh()

    def retranscribe_selected(self, model: str | None = None) -> JobHandle | None:
        """Transcribe the selected recording again (``model``: a model name/path; "" = the default one)."""
        entry = self._history.get(self.selected_id()) if self.selected_id() is not None else None
        if entry is None:
            return None
        job = self._retranscribe(entry, model)
        self.refresh(select=entry.id)
        return job

    def transcribe_interrupted(self) -> list[JobHandle]:
        """Transcribe every interrupted dictation with the loaded model; returns the jobs."""
        jobs = [self._retranscribe(entry) for entry in self._history.interrupted()]
        self.refresh()
        return jobs

    def _retranscribe(self, entry: Entry, model: str | None = None) -> JobHandle:
        settings = self._settings()
        chosen = settings.model if model is None else model
        job = self._client.submit_file(
            entry.audio_path,
            priority=PRIORITY_HISTORY,
            language=settings.language or None,
            prompt=settings.prompt,
            model=chosen if chosen != settings.model else None,
        )
        job.finished.connect(partial(self._on_finished, entry.id))
        job.failed.connect(partial(self._on_failed, entry.id))
        job.cancelled.connect(partial(self._on_failed, entry.id, "Cancelled."))
        self._history.retry(entry.id)
        return job

    def _on_finished(self, entry_id: int, transcript) -> None:
        settings = self._settings()
        self._writer.write((entry_id, transcript.model), transcript.text.strip(), text_rules(settings),
                           cleanup_for(settings))

    def stop(self) -> None:
        """Write nothing more: the History is closing (a text still being written is dropped; its
        recording stays, and the entry is offered as interrupted at the next start)."""
        self._writer.stop()
        self._stopped = True

    def _on_written(self, written: Written) -> None:
        if self._stopped:
            return
        entry_id, model = written.key
        self._history.finish(entry_id, written.text, model, raw_text=written.raw, note=written.note)
        self.refresh()
        self.entry_changed.emit(entry_id)

    def _on_failed(self, entry_id: int, message: str) -> None:
        self._history.fail(entry_id, message)
        self.refresh()
