"""The floating recording indicator: a dark pill near the bottom of the screen.

It must never take the keyboard focus: the text is delivered to whatever window has it, so an overlay
that grabbed focus would receive the dictation itself. Hence a Tool window that doesn't accept focus,
is shown without activation, is transparent for input, and bypasses the X window manager (an
override-redirect window can't be focused or listed in the taskbar).

States: recording (red pulsing dot, level bars, elapsed time, words so far), transcribing (amber),
and a short message (delivered, kept, error) that hides itself.

On Wayland no client may place its own window: only a layer-shell surface floats above the others
without taking focus or space, and Qt offers none, so an overlay there would be an ordinary window that
the compositor tiles or centres. There is no overlay on Wayland (``can_float``): the tray icon shows
the state, and messages go to the main window and the desktop's notifications.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QCursor, QFontMetrics, QGuiApplication, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from sayso.app.platform import assets
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import LevelBars, PulseDot, format_duration

WIDTH = 400
BOTTOM_MARGIN = 72
MESSAGE_MS = 3500
_KIND_COLORS = {"ok": COLORS["ok"], "warn": COLORS["working"], "error": COLORS["recording"], "info": "#A5B4FC"}


def can_float() -> bool:
    """Whether this desktop can show the overlay: not on Wayland (see above)."""
    return not QGuiApplication.platformName().startswith("wayland")


class Overlay(QWidget):
    def __init__(self):
        flags = (
            Qt.WindowType.Tool
            | Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.WindowDoesNotAcceptFocus
            | Qt.WindowType.WindowTransparentForInput
            | Qt.WindowType.X11BypassWindowManagerHint
        )
        super().__init__(None, flags)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setWindowTitle("Sayso recording")
        self.setFixedWidth(WIDTH)

        column = QVBoxLayout(self)
        column.setContentsMargins(18, 12, 18, 12)
        column.setSpacing(6)
        row = QHBoxLayout()
        row.setSpacing(10)
        self.dot = PulseDot(COLORS["recording"])
        self.icon = QLabel()
        self.icon.hide()
        self.state = QLabel("Listening")
        self.state.setStyleSheet("color: white; font-weight: 600;")
        self.bars = LevelBars(20, color="#F9FAFB", idle="#4B5563")
        self.bars.setFixedHeight(22)
        self.elapsed = QLabel("0:00")
        self.elapsed.setStyleSheet(f"color: {COLORS['faint']};")
        row.addWidget(self.dot)
        row.addWidget(self.icon)
        row.addWidget(self.state)
        row.addWidget(self.bars, 1)
        row.addWidget(self.elapsed)
        column.addLayout(row)
        self.text = QLabel()
        self.text.setStyleSheet("color: #E5E7EB;")
        self.text.hide()
        column.addWidget(self.text)

        self._started = 0.0
        self._clock = QTimer(self)
        self._clock.setInterval(250)
        self._clock.timeout.connect(self._tick)
        self._hide_timer = QTimer(self)
        self._hide_timer.setSingleShot(True)
        self._hide_timer.timeout.connect(self.hide)

    # ---- states -------------------------------------------------------------------------------------

    def show_recording(self) -> None:
        self._hide_timer.stop()
        self._set_lead(COLORS["recording"], "Listening")
        self.dot.start()
        self.bars.clear()
        self.bars.show()
        self.elapsed.show()
        self.set_text("")
        self._started = time.monotonic()
        self._tick()
        self._clock.start()
        self._present()

    def set_level(self, level: float) -> None:
        if self._clock.isActive():
            self.bars.push(level)

    def set_text(self, text: str) -> None:
        """The words so far; long text shows its end, where the user is speaking."""
        words = text.split()
        metrics = QFontMetrics(self.text.font())
        shown = " ".join(words)
        while len(words) > 1 and metrics.horizontalAdvance(shown) > WIDTH - 36:
            words.pop(0)  # whole words drop off the front, so the line never starts mid-word
            shown = "… " + " ".join(words)
        self.text.setText(shown)
        self.text.setVisible(bool(shown))
        self.adjustSize()

    def show_transcribing(self, note: str = "Transcribing…") -> None:
        self._hide_timer.stop()
        self._clock.stop()
        self._set_lead(COLORS["working"], note)
        self.dot.start()
        self.bars.hide()
        self.elapsed.hide()
        self._present()

    def show_message(self, message: str, kind: str = "info", timeout_ms: int = MESSAGE_MS) -> None:
        """A one-line status ("Inserted", "Text kept in Sayso", an error) that hides after ``timeout_ms``."""
        self._clock.stop()
        self.dot.stop()
        self.dot.hide()
        icon = {"ok": "check", "warn": "alert", "error": "alert", "info": "waveform"}[kind]
        self.icon.setPixmap(assets.pixmap(icon, _KIND_COLORS[kind], 16))
        self.icon.show()
        self.state.setText(message)
        self.state.setWordWrap(True)
        self.bars.hide()
        self.elapsed.hide()
        self.text.hide()
        self._present()
        self._hide_timer.start(timeout_ms)

    def _set_lead(self, color: str, text: str) -> None:
        self.icon.hide()
        self.dot.show()
        self.dot.set_color(color)
        self.state.setWordWrap(False)
        self.state.setText(text)

    def _tick(self) -> None:
        self.elapsed.setText(format_duration(time.monotonic() - self._started))

    def hideEvent(self, event) -> None:
        self._clock.stop()
        self.dot.stop()
        super().hideEvent(event)

    # ---- window -------------------------------------------------------------------------------------

    def _present(self) -> None:
        self.adjustSize()
        screen = QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            self.move(area.center().x() - self.width() // 2, area.bottom() - self.height() - BOTTOM_MARGIN)
        if not self.isVisible():
            self.show()
        self.raise_()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        background = QColor(COLORS["overlay"])
        background.setAlphaF(0.94)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(background)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        radius = min(rect.height() / 2, 22.0)
        painter.drawRoundedRect(rect, radius, radius)
