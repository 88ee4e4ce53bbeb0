"""The first page: the record button, what the app is doing, and the last dictation."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app import assets
from app.style import COLORS
from app.widgets import Card, LevelBars, NoticeBar, PageHeader, RecordButton, label

# state -> (title, color of the level bars)
STATES = {
    "loading": ("Loading model…", COLORS["faint"]),
    "ready": ("Ready", COLORS["accent"]),
    "recording": ("Listening…", COLORS["recording"]),
    "transcribing": ("Transcribing…", COLORS["working"]),
    "error": ("Can't dictate yet", COLORS["faint"]),
}


class DictationPage(QWidget):
    record_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(28, 24, 28, 24)
        column.setSpacing(16)
        self.header = PageHeader("Dictation", "")
        column.addWidget(self.header)

        self.notice = NoticeBar()
        column.addWidget(self.notice)

        status = Card(spacing=0)
        row = QHBoxLayout()
        row.setSpacing(20)
        self.record = RecordButton()
        self.record.clicked.connect(self.record_clicked)
        row.addWidget(self.record, 0, Qt.AlignmentFlag.AlignVCenter)
        texts = QVBoxLayout()
        texts.setSpacing(4)
        texts.addStretch(1)
        self.state = label("", "StateTitle")
        self.detail = label("", "Muted", wrap=True)
        self.bars = LevelBars(40)
        self.bars.setFixedHeight(30)
        texts.addWidget(self.state)
        texts.addWidget(self.detail)
        texts.addSpacing(6)
        texts.addWidget(self.bars)
        texts.addStretch(1)
        row.addLayout(texts, 1)
        status.body.addLayout(row)
        column.addWidget(status)

        last = Card("Last dictation")
        self.copy = QPushButton(assets.icon("copy", COLORS["muted"], 16), "Copy")
        self.copy.clicked.connect(self._copy)
        self.copy.setEnabled(False)
        last.header.addWidget(self.copy)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setPlaceholderText("What you dictate appears here too, and stays in History.")
        self.text.setMinimumHeight(90)
        last.body.addWidget(self.text, 1)
        self.kept = NoticeBar()
        last.body.addWidget(self.kept)
        self.meta = label("", "Faint")
        last.body.addWidget(self.meta)
        column.addWidget(last, 1)
        self.set_state("loading", "")

    def set_hint(self, text: str) -> None:
        self.header.subtitle.setText(text)
        self.header.subtitle.setVisible(bool(text))

    def set_state(self, state: str, detail: str) -> None:
        title, color = STATES[state]
        self.state.setText(title)
        self.detail.setText(detail)
        self.bars.set_color(color)
        self.record.set_state(state == "recording", busy=state == "transcribing")
        self.record.setEnabled(state != "error")
        if state != "recording":
            self.bars.clear()

    def set_level(self, level: float) -> None:
        self.bars.push(level)
        self.record.set_level(level)

    def show_result(self, text: str, meta: str, kept_message: str = "") -> None:
        self.text.setPlainText(text)
        self.copy.setEnabled(bool(text))
        self.meta.setText(meta)
        if kept_message:
            self.kept.show_text(kept_message)
        else:
            self.kept.hide()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())
