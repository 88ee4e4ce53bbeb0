"""Small widgets shared by the pages and the overlay: cards, page headers, the record button, level bars."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import Property, QEasingCurve, QPropertyAnimation, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from sayso.app.platform import assets
from sayso.app.ui.style import COLORS


def format_duration(seconds: float) -> str:
    """11.2 -> "0:11", 3725 -> "1:02:05"."""
    total = int(round(max(seconds, 0.0)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def label(text: str = "", name: str = "", wrap: bool = False) -> QLabel:
    """A QLabel with an object name (for the style sheet) and optional word wrap."""
    widget = QLabel(text)
    if name:
        widget.setObjectName(name)
    widget.setWordWrap(wrap)
    return widget


def icon_button(icon: str, tip: str, color: str = COLORS["muted"]) -> QToolButton:
    button = QToolButton()
    button.setObjectName("Icon")
    button.setIcon(assets.icon(icon, color))
    button.setIconSize(QSize(18, 18))
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class ElidedLabel(QLabel):
    """A one-line label that shortens its text with "…" to fit its width (the full text is the tooltip)."""

    def __init__(self, text: str = "", name: str = "", mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight):
        super().__init__()
        if name:
            self.setObjectName(name)
        self._full = ""
        self._mode = mode
        self.setMinimumWidth(40)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.set_full_text(text)

    def set_full_text(self, text: str) -> None:
        self._full = " ".join(text.split())
        self.setToolTip(self._full if len(self._full) > 40 else "")
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self._full, self._mode, max(self.contentsRect().width(), 40)))


class Card(QFrame):
    """A white rounded panel; ``body`` is its vertical layout."""

    def __init__(self, title: str = "", parent: QWidget | None = None, spacing: int = 10):
        super().__init__(parent)
        self.setObjectName("Card")
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(18, 16, 18, 16)
        self.body.setSpacing(spacing)
        self.header = QHBoxLayout()
        self.header.setSpacing(8)
        if title:
            self.title = label(title, "CardTitle")
            self.header.addWidget(self.title)
            self.header.addStretch(1)
            self.body.addLayout(self.header)


class PageHeader(QWidget):
    """A page's title, a muted subtitle under it, and room on the right for actions."""

    def __init__(self, title: str, subtitle: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        texts.addWidget(label(title, "PageTitle"))
        # Always in the layout, hidden while empty: a label left out of it has no parent, and showing it
        # later (``DictationPage.set_hint``) would open it as a window of its own.
        self.subtitle = label(subtitle, "Muted", wrap=True)
        self.subtitle.setVisible(bool(subtitle))
        texts.addWidget(self.subtitle)
        row.addLayout(texts, 1)
        self.actions = QHBoxLayout()
        self.actions.setSpacing(8)
        row.addLayout(self.actions)


def scrolling_page(page: QWidget, title: str, subtitle: str) -> QVBoxLayout:
    """Fill ``page`` with a frameless scroll area holding a padded column headed by ``title`` and
    ``subtitle``; returns the column, for the page's cards (the Models and Settings pages)."""
    outer = QVBoxLayout(page)
    outer.setContentsMargins(0, 0, 0, 0)
    scroll = QScrollArea()
    scroll.setObjectName("Page")
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    outer.addWidget(scroll)
    body = QWidget()
    body.setObjectName("PageBody")
    scroll.setWidget(body)
    column = QVBoxLayout(body)
    column.setContentsMargins(28, 24, 28, 24)
    column.setSpacing(16)
    column.addWidget(PageHeader(title, subtitle))
    return column


class RecordButton(QAbstractButton):
    """The big round button: indigo with a microphone when idle, red with a stop square while recording.

    While recording a soft ring around it grows with the input level.
    """

    def __init__(self, diameter: int = 84, parent: QWidget | None = None):
        super().__init__(parent)
        self._diameter = diameter
        self._recording = False
        self._busy = False
        self._level = 0.0
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        # No keyboard focus: the default shortcut holds Space, which would also "click" a focused button.
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setFixedSize(diameter + 28, diameter + 28)
        self.setToolTip("Start dictating")

    def set_state(self, recording: bool, busy: bool = False) -> None:
        self._recording, self._busy = recording, busy
        self.setToolTip("Stop and transcribe" if recording else "Start dictating")
        self.update()

    def set_level(self, level: float) -> None:
        self._level = level
        if self._recording:
            self.update()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        center = QRectF(self.rect()).center()
        radius = self._diameter / 2
        base = QColor(COLORS["recording"] if self._recording else COLORS["accent"])
        if not self.isEnabled():
            base = QColor("#C7D2FE")
        elif self.isDown() or (self.underMouse() and not self._recording):
            base = base.darker(110)
        if self._recording:
            halo = QColor(base)
            halo.setAlphaF(0.18)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(halo)
            grow = 4 + 10 * self._level
            painter.drawEllipse(center, radius + grow, radius + grow)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(base)
        painter.drawEllipse(center, radius, radius)
        glyph = "stop" if self._recording else "mic"
        size = int(self._diameter * 0.42)
        pix = assets.pixmap(glyph, "#FFFFFF", size)
        painter.drawPixmap(int(center.x() - size / 2), int(center.y() - size / 2), pix)
        if self._busy:
            pen = QPen(QColor(COLORS["working"]), 3)
            pen.setCapStyle(Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawArc(
                QRectF(center.x() - radius - 6, center.y() - radius - 6, 2 * radius + 12, 2 * radius + 12),
                90 * 16,
                -120 * 16,
            )

    def sizeHint(self) -> QSize:
        return QSize(self._diameter + 28, self._diameter + 28)


class LevelBars(QWidget):
    """Rounded vertical bars showing the recent input level, newest on the right (a scrolling meter).

    ``push(level)`` adds one reading (microphone.level_of's 0..1 over -60..0 dBFS); a short attack/decay
    keeps the motion smooth at 30 Hz. The bars show -42..-6 dBFS: below is room noise, above is loud.
    """

    FLOOR, CEILING = 0.3, 0.9

    def __init__(self, bars: int = 24, color: str = COLORS["accent"], idle: str = COLORS["border"], parent=None):
        super().__init__(parent)
        self._levels: deque[float] = deque([0.0] * bars, maxlen=bars)
        self._color = QColor(color)
        self._idle = QColor(idle)
        self._smoothed = 0.0
        self.setMinimumHeight(28)

    def set_color(self, color: str) -> None:
        self._color = QColor(color)
        self.update()

    def push(self, level: float) -> None:
        rate = 0.7 if level > self._smoothed else 0.45
        self._smoothed += rate * (level - self._smoothed)
        self._levels.append(self._smoothed)
        self.update()

    def clear(self) -> None:
        self._levels.extend([0.0] * self._levels.maxlen)
        self._smoothed = 0.0
        self.update()

    def levels(self) -> list[float]:
        return list(self._levels)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        count = self._levels.maxlen
        width, height = self.width(), self.height()
        slot = width / count
        bar = max(2.0, slot * 0.55)
        painter.setPen(Qt.PenStyle.NoPen)
        for i, level in enumerate(self._levels):
            loudness = min(1.0, max(0.0, (level - self.FLOOR) / (self.CEILING - self.FLOOR)))
            h = max(bar, height * (0.12 + 0.88 * loudness))
            x = i * slot + (slot - bar) / 2
            painter.setBrush(self._color if loudness > 0.02 else self._idle)
            painter.drawRoundedRect(QRectF(x, (height - h) / 2, bar, h), bar / 2, bar / 2)


class PulseDot(QWidget):
    """A small dot that breathes (opacity) while ``running``: the overlay's recording light."""

    def __init__(self, color: str, diameter: int = 10, parent=None):
        super().__init__(parent)
        self._color = QColor(color)
        self._phase = 0.0
        self.setFixedSize(diameter + 4, diameter + 4)
        self._animation = QPropertyAnimation(self, b"phase", self)
        self._animation.setStartValue(0.0)
        self._animation.setEndValue(1.0)
        self._animation.setDuration(1200)
        self._animation.setLoopCount(-1)
        self._animation.setEasingCurve(QEasingCurve.Type.Linear)

    def set_color(self, color: str) -> None:
        self._color = QColor(color)
        self.update()

    def start(self) -> None:
        self._animation.start()

    def stop(self) -> None:
        self._animation.stop()
        self._phase = 0.0
        self.update()

    def _get_phase(self) -> float:
        return self._phase

    def _set_phase(self, value: float) -> None:
        self._phase = value
        self.update()

    phase = Property(float, _get_phase, _set_phase)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor(self._color)
        color.setAlphaF(0.55 + 0.45 * (0.5 + 0.5 * math.cos(2 * math.pi * self._phase)))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        r = (self.width() - 4) / 2
        painter.drawEllipse(QRectF(self.rect()).center(), r, r)


class NoticeBar(QFrame):
    """An amber note with an icon, for things the user should know but that aren't errors."""

    closed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("Notice")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 8, 6, 8)
        row.setSpacing(8)
        icon = QLabel()
        icon.setPixmap(assets.pixmap("alert", COLORS["warn_text"], 16))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(icon)
        self.text = label("", "Notice", wrap=True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.text, 1)
        close = icon_button("close", "Dismiss", COLORS["warn_text"])
        close.clicked.connect(self.dismiss)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_text(self, text: str) -> None:
        self.text.setText(text)
        self.show()

    def dismiss(self) -> None:
        self.hide()
        self.closed.emit()


SIDE_BY_SIDE_WIDTH = 700  # pixels a list and its detail need side by side

class ListAndDetail(QSplitter):
    """The body of the Files and History pages: ``list`` on the left and, once ``set_detail`` adds it,
    a detail card on the right, sized 2:3. ``on_select`` runs whenever the list's current item changes."""

    def __init__(self, on_select: Callable[[], None]) -> None:
        super().__init__(Qt.Orientation.Horizontal)
        self.setChildrenCollapsible(False)
        self.setHandleWidth(16)
        self.list = QListWidget()
        self.list.setObjectName("List")
        self.list.setMinimumWidth(260)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.currentItemChanged.connect(lambda *_: on_select())
        self.addWidget(self.list)

    def set_detail(self, detail: QWidget) -> None:
        self.addWidget(detail)
        self.setStretchFactor(0, 2)
        self.setStretchFactor(1, 3)
        self.setSizes([300, 460])

    def minimumSizeHint(self) -> QSize:
        """As narrow as its widest part: narrower than side by side allows, it puts them one under the other."""
        parts = [self.widget(i).minimumSizeHint().width() for i in range(self.count())]
        return QSize(max(parts), super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        # Side by side where both fit; in a narrow window (a tiled half screen) the detail goes under the
        # list, each as wide as the page, rather than both squeezed until their texts are cut.
        orientation = Qt.Orientation.Vertical if event.size().width() < SIDE_BY_SIDE_WIDTH else Qt.Orientation.Horizontal
        if orientation != self.orientation():
            self.setOrientation(orientation)
        super().resizeEvent(event)


def settings_row(title: str, description: str, control: QWidget) -> QWidget:
    """A settings line: title and a muted explanation on the left, the control on the right."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 4, 0, 4)
    layout.setSpacing(24)
    texts = QVBoxLayout()
    texts.setSpacing(2)
    texts.addWidget(label(title))
    if description:
        texts.addWidget(label(description, "Muted", wrap=True))
    layout.addLayout(texts, 1)
    control.setFixedWidth(280)
    layout.addWidget(control, 0, Qt.AlignmentFlag.AlignVCenter)
    return row


def select_data(combo: QComboBox, value) -> None:
    """Select the item whose data is ``value`` (the first item when none has it)."""
    index = combo.findData(value)
    combo.setCurrentIndex(max(index, 0))
