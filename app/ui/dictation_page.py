"""The first page: the record button, what the app is doing, and the last dictation."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget

from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import Card, ElidedLabel, LevelBars, NoticeBar, PageHeader, RecordButton, icon_button, label

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

        recent = Card("Recent dictations")
        self.kept = NoticeBar()
        recent.body.addWidget(self.kept)
        self.recent = QVBoxLayout()
        self.recent.setSpacing(0)
        recent.body.addLayout(self.recent)
        self.empty = label("Nothing dictated yet. Your words show up here and in History.", "Muted", wrap=True)
        recent.body.addWidget(self.empty)
        column.addWidget(recent)
        column.addStretch(1)
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

    def show_recent(self, items: list[tuple[str, str]], kept_message: str = "") -> None:
        """The latest dictations as (text, meta), newest first; ``kept_message`` explains an undelivered one.
        A take without words is shown only while it is the newest: it answers "did it hear me?", and
        older ones would push the dictations out of the list."""
        while self.recent.count():
            self.recent.takeAt(0).widget().deleteLater()
        shown = [(text, meta) for i, (text, meta) in enumerate(items) if text or i == 0]
        for i, (text, meta) in enumerate(shown):
            self.recent.addWidget(RecentRow(text, meta, first=i == 0))
        self.empty.setVisible(not items)
        if kept_message:
            self.kept.show_text(kept_message)
        else:
            self.kept.hide()

    def recent_rows(self) -> list[RecentRow]:
        return [self.recent.itemAt(i).widget() for i in range(self.recent.count())]

    def recent_texts(self) -> list[str]:
        return [self.recent.itemAt(i).widget().text for i in range(self.recent.count())]


class RecentRow(QWidget):
    """One past dictation: its text (selectable), when and how long, and a copy button."""

    def __init__(self, text: str, meta: str, first: bool):
        super().__init__()
        self.text = text
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 10, 0, 10)
        row.setSpacing(12)
        column = QVBoxLayout()
        column.setSpacing(3)
        # One line, shortened with "…" to the row's width (the whole text is the tooltip and the copy
        # button's): a wrapped label in a narrow window was cut mid-line by the row's height.
        self.body = ElidedLabel(text or "(no speech)", "" if text else "Faint")
        column.addWidget(self.body)
        column.addWidget(label(meta, "Faint"))
        row.addLayout(column, 1)
        copy = icon_button("copy", "Copy")
        copy.setEnabled(bool(text))
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(text))
        row.addWidget(copy, 0, Qt.AlignmentFlag.AlignTop)
        if not first:
            self.setStyleSheet(f"RecentRow {{ border-top: 1px solid {COLORS['border']}; }}")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
