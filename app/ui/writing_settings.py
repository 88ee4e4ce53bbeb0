"""The Settings page's cards for what happens to the text: commands and vocabulary, the cleanup, per-app
profiles. Each card shows its part of ``Settings`` (``load``) and gives it back (``values``); the page
merges them, and a change anywhere emits the page's one ``changed``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QWidget,
)

from sayso.app.core.profiles import Profile
from sayso.app.core.settings import Settings
from sayso.app.core.text.cleanup import DEFAULT_PROMPT
from sayso.app.core.text.vocabulary import format_replacements, parse_replacements, read_replacements_file
from sayso.app.ui.widgets import Card, label, select_data, settings_row

TYPING_PAUSE_MS = 600  # a text field's change applies once the user pauses typing


def _typing_timer(parent: QObject, then: Callable[[], None]) -> QTimer:
    timer = QTimer(parent, singleShot=True, interval=TYPING_PAUSE_MS)
    timer.timeout.connect(then)
    return timer


class WritingCard(Card):
    """Spoken commands, fillers and the replacements list (with import and export as a file)."""

    changed = Signal()

    def __init__(self):
        super().__init__("Writing")
        self.commands = QCheckBox("Follow spoken commands")
        self.commands.toggled.connect(self.changed)
        self.body.addWidget(settings_row(
            "Spoken commands", "Say “comma”, “period”, “question mark”, “new line”, “new paragraph”, or “scratch "
            "that” to drop the last sentence.", self.commands))  # fmt: skip
        self.fillers = QCheckBox("Remove “um” and “uh”")
        self.fillers.toggled.connect(self.changed)
        self.body.addWidget(settings_row("Fillers", "Hesitations are left out of the text.", self.fillers))
        self.replacements = QPlainTextEdit()
        self.replacements.setPlaceholderText("jay son -> JSON\nsay so -> Sayso")
        self.replacements.setFixedHeight(88)
        self._typing = _typing_timer(self, self._replacements_edited)
        self.replacements.textChanged.connect(self._typing.start)
        buttons = QWidget()
        row = QHBoxLayout(buttons)
        row.setContentsMargins(0, 0, 0, 0)
        self.import_button = QPushButton("Import…")
        self.import_button.clicked.connect(self._import)
        self.export_button = QPushButton("Export…")
        self.export_button.clicked.connect(self._export)
        row.addWidget(self.import_button)
        row.addWidget(self.export_button)
        self.body.addWidget(settings_row(
            "Replacements", "One per line: what you say, “->”, what is written. Whole words; a written form in "
            "lower case takes a capital at the start of a sentence.", self.replacements))  # fmt: skip
        self.body.addWidget(settings_row("", "", buttons))
        self.problem = label("", "Error", wrap=True)
        self.problem.hide()
        self.body.addWidget(self.problem)
        self._valid = ""  # the replacements as last read without error

    def load(self, settings: Settings) -> None:
        self.commands.setChecked(settings.spoken_commands)
        self.fillers.setChecked(settings.remove_fillers)
        self._valid = settings.replacements
        if self.replacements.toPlainText().strip() != settings.replacements.strip():
            self.replacements.setPlainText(settings.replacements)
        self._typing.stop()
        self.problem.hide()

    def values(self) -> dict:
        return {"spoken_commands": self.commands.isChecked(), "remove_fillers": self.fillers.isChecked(),
                "replacements": self._valid}  # fmt: skip

    def _replacements_edited(self) -> None:
        """Apply the list once it reads; until then say what is wrong and keep the last good one."""
        text = self.replacements.toPlainText().strip()
        try:
            parse_replacements(text)
        except ValueError as error:
            self.problem.setText(f"Not applied yet: {error}")
            self.problem.show()
            return
        self.problem.hide()
        self._valid = text
        self.changed.emit()

    def import_file(self, path: Path) -> None:
        """Read a replacements file into the list (a file that can't be read or parsed changes nothing)."""
        try:
            text, _ = read_replacements_file(path)
        except (OSError, ValueError) as error:
            self.problem.setText(f"{Path(path).name} was not imported: {getattr(error, 'strerror', None) or error}")
            self.problem.show()
            return
        self.replacements.setPlainText(text.strip())
        self._typing.stop()
        self._replacements_edited()

    def export_file(self, path: Path) -> None:
        try:
            Path(path).write_text(format_replacements(parse_replacements(self._valid)), encoding="utf-8")
        except OSError as error:
            self.problem.setText(f"The replacements could not be saved: {error.strerror}.")
            self.problem.show()

    def _import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import replacements", str(Path.home()), "Text files (*.txt)")
        if path:
            self.import_file(Path(path))

    def _export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export replacements", str(Path.home() / "replacements.txt"),
                                              "Text files (*.txt)")  # fmt: skip
        if path:
            self.export_file(Path(path))


class CleanupCard(Card):
    """The optional cleanup through an OpenAI-compatible chat server."""

    changed = Signal()

    def __init__(self):
        super().__init__("Cleanup by a language model")
        self.enabled = QCheckBox("Clean up each dictation")
        self.enabled.toggled.connect(self.changed)
        self.enabled.toggled.connect(self._show_enabled)
        self.body.addWidget(settings_row(
            "Cleanup", "A language model you run (llama.cpp's server, Ollama…) fixes punctuation and fillers. "
            "If it fails or is slow, the text goes in as heard.", self.enabled))  # fmt: skip
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8080/v1")
        self.model = QLineEdit()
        self.model.setPlaceholderText("the server's default")
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("none")
        self.timeout = QDoubleSpinBox()
        self.timeout.setRange(0.5, 60.0)
        self.timeout.setSingleStep(0.5)
        self.timeout.setSuffix(" s")
        self.timeout.valueChanged.connect(self.changed)
        self.prompt = QPlainTextEdit()
        self.prompt.setPlaceholderText(DEFAULT_PROMPT)
        self.prompt.setFixedHeight(88)
        self._typing = _typing_timer(self, self.changed.emit)
        for edit in (self.url, self.model, self.api_key):
            edit.textEdited.connect(self._typing.start)
        self.prompt.textChanged.connect(self._typing.start)
        self._fields = [
            settings_row("Server", "Its OpenAI-compatible address; Ollama's is http://127.0.0.1:11434/v1.", self.url),
            settings_row("Model", "The name the server knows it by (Ollama needs one).", self.model),
            settings_row("API key", "Only for a server that asks for one.", self.api_key),
            settings_row("Wait at most", "Longer, and the text goes in without the cleanup.", self.timeout),
            settings_row("Instructions", "Empty: Sayso's own.", self.prompt),
        ]
        for row in self._fields:
            self.body.addWidget(row)

    def _show_enabled(self, on: bool) -> None:
        for row in self._fields:
            row.setEnabled(on)

    def load(self, settings: Settings) -> None:
        self.enabled.setChecked(settings.cleanup)
        self._show_enabled(settings.cleanup)
        for edit, value in ((self.url, settings.cleanup_url), (self.model, settings.cleanup_model),
                            (self.api_key, settings.cleanup_api_key)):  # fmt: skip
            if edit.text() != value:
                edit.setText(value)
        self.timeout.setValue(settings.cleanup_timeout)
        if self.prompt.toPlainText().strip() != settings.cleanup_prompt.strip():
            self.prompt.setPlainText(settings.cleanup_prompt)
        self._typing.stop()

    def values(self) -> dict:
        return {"cleanup": self.enabled.isChecked(), "cleanup_url": self.url.text().strip(),
                "cleanup_model": self.model.text().strip(), "cleanup_api_key": self.api_key.text().strip(),
                "cleanup_timeout": float(self.timeout.value()), "cleanup_prompt": self.prompt.toPlainText().strip()}


class ProfilesCard(Card):
    """Per-app profiles as a table: one row per app, an empty choice keeps what Settings say."""

    changed = Signal()
    COLUMNS = ("App", "Model", "Language", "Insert by", "Commands")

    def __init__(self, models: Callable[[], list[tuple[str, str]]], languages: list[tuple[str, str]]):
        super().__init__("Per-app profiles")
        self._models = models
        self._languages = languages
        self.body.addWidget(label(
            "A dictation into one of these apps uses its own choices. Name the app by its window class (X11) "
            "or app id (Wayland): the last dictation's app is shown below.", "Muted", wrap=True))  # fmt: skip
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(140)
        self.body.addWidget(self.table)
        buttons = QHBoxLayout()
        self.last_app = label("", "Muted")
        buttons.addWidget(self.last_app, 1)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(lambda: self.add_profile(Profile(self._last or "app")))
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._remove_selected)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        self.body.addLayout(buttons)
        self._typing = _typing_timer(self, self.changed.emit)
        self._last = ""
        self._loading = False

    def show_last_app(self, app: str) -> None:
        """The app the last dictation went to, so the user knows its name here."""
        self._last = app
        self.last_app.setText(f"Last dictation: {app}" if app else "")

    def load(self, settings: Settings) -> None:
        if tuple(settings.profiles) == self.profiles():
            return
        self._loading = True
        self.table.setRowCount(0)
        for profile in settings.profiles:
            self._append(profile)
        self._loading = False

    def values(self) -> dict:
        return {"profiles": self.profiles()}

    def profiles(self) -> tuple[Profile, ...]:
        rows = []
        for row in range(self.table.rowCount()):
            app = self.table.cellWidget(row, 0).text().strip()
            if app:
                model, language, delivery = (self.table.cellWidget(row, c).currentData() for c in (1, 2, 3))
                rows.append(Profile(app, model, language, delivery, self.table.cellWidget(row, 4).isChecked()))
        return tuple(rows)

    def add_profile(self, profile: Profile) -> None:
        self._append(profile)
        self.changed.emit()

    def _append(self, profile: Profile) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        app = QLineEdit(profile.app)
        app.textEdited.connect(self._typing.start)
        self.table.setCellWidget(row, 0, app)
        choices = (
            [("As in Settings", "")] + [(text, value) for text, value in self._models() if value],
            [("As in Settings", "")] + [(name, code) for code, name in self._languages if code],
            [("As in Settings", ""), ("Paste", "paste"), ("Typing", "type")],
        )
        for column, (items, value) in enumerate(zip(choices, (profile.model, profile.language, profile.delivery)), 1):
            combo = QComboBox()
            for text, data in items:
                combo.addItem(text, data)
            if value and combo.findData(value) < 0:
                combo.addItem(Path(value).stem, value)
            select_data(combo, value)
            combo.currentIndexChanged.connect(self._edited)
            self.table.setCellWidget(row, column, combo)
        commands = QCheckBox()
        commands.setChecked(profile.commands)
        commands.toggled.connect(self._edited)
        self.table.setCellWidget(row, 4, commands)

    def _edited(self, *_) -> None:
        if not self._loading:
            self.changed.emit()

    def _remove_selected(self) -> None:
        row = self.table.currentRow()
        if row < 0 and self.table.rowCount():
            row = self.table.rowCount() - 1
        if row >= 0:
            self.table.removeRow(row)
            self.changed.emit()
