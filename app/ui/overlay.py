"""The floating recording indicator: a dark pill near the bottom of the screen.

It must never take the keyboard focus: the text is delivered to whatever window has it, so an overlay
that grabbed focus would receive the dictation itself. Hence a Tool window that doesn't accept focus,
is shown without activation, is transparent for input, and bypasses the X window manager (an
override-redirect window can't be focused or listed in the taskbar).

States: recording (red pulsing dot, level bars, elapsed time, words so far), transcribing (amber),
and a short message (delivered, kept, error) that hides itself.

On Wayland no client may place its own window: an ordinary window is one the compositor tiles or
centres. Only a layer-shell surface floats above the others without taking focus or space, and Qt
offers none: there the widget is never a window of its own (Qt lays it out and paints it, the
compositor never sees it), and ``LayerMirror`` copies its pixels to a surface on the compositor's
overlay layer (``app.platform.layer_shell``). A compositor without the layer shell (GNOME) gets no
overlay (``can_float``): the tray icon shows the state, and messages go to the main window and the
desktop's notifications.
"""

from __future__ import annotations

import functools
import logging
import math
import time

from PySide6.QtCore import QEvent, QObject, QPoint, QRectF, QSocketNotifier, Qt, QTimer
from PySide6.QtGui import QColor, QCursor, QFontMetrics, QGuiApplication, QImage, QPainter, QRegion
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from sayso.app.platform import assets, layer_shell
from sayso.app.ui.style import COLORS
from sayso.app.ui.widgets import LevelBars, PulseDot, format_duration

WIDTH = 400
BOTTOM_MARGIN = 72
MESSAGE_MS = 3500
FRAME_MS = 33  # the layer surface's frame rate while shown (~30 fps): the dot breathes, the bars move
_KIND_COLORS = {"ok": COLORS["ok"], "warn": COLORS["working"], "error": COLORS["recording"], "info": "#A5B4FC"}


log = logging.getLogger(__name__)


def on_wayland() -> bool:
    return QGuiApplication.platformName().startswith("wayland")


def can_float() -> bool:
    """Whether this desktop can show the overlay: X11, or a Wayland compositor with the layer shell."""
    return not on_wayland() or _compositor_offers_layer_shell()


@functools.cache
def _compositor_offers_layer_shell() -> bool:
    return layer_shell.offers_layer_shell(layer_shell.advertised_interfaces())


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
        row = self.row = QHBoxLayout()
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

        self.layer_mirror: LayerMirror | None = None
        if on_wayland():
            self.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)  # never a window of its own (see above)
            if can_float():
                try:
                    self.layer_mirror = LayerMirror(self, layer_shell.LayerSurface("sayso", BOTTOM_MARGIN))
                except ValueError as error:
                    log.warning("no overlay: %s", error)

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
        self._fit()

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
        self.row.setStretchFactor(self.state, 1)  # the message takes the width the bars leave
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
        self.row.setStretchFactor(self.state, 0)
        self.state.setText(text)

    def _tick(self) -> None:
        self.elapsed.setText(format_duration(time.monotonic() - self._started))

    def hideEvent(self, event) -> None:
        self._clock.stop()
        self.dot.stop()
        super().hideEvent(event)

    # ---- window -------------------------------------------------------------------------------------

    def _fit(self) -> None:
        """Its height for its fixed width: a wrapped message's lines all show (``adjustSize`` sizes a
        wrapped label for a width of its own guessing, and cut the lines of a long one)."""
        layout = self.layout()
        layout.activate()
        height = layout.totalHeightForWidth(WIDTH) if layout.hasHeightForWidth() else layout.totalSizeHint().height()
        self.setFixedHeight(height)

    def _present(self) -> None:
        self._fit()
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


class LayerMirror(QObject):
    """Puts a widget that Qt never maps (WA_DontShowOnScreen) on a layer surface while it is shown: its
    pixels, rendered every ``FRAME_MS``, go to the surface, and hiding it takes the surface away."""

    def __init__(self, widget: QWidget, surface: layer_shell.LayerSurface):
        super().__init__(widget)
        self.widget, self.surface = widget, surface
        self._reader = QSocketNotifier(surface.fileno(), QSocketNotifier.Type.Read, self)
        self._reader.activated.connect(self._read)
        self._frames = QTimer(self)
        self._frames.setInterval(FRAME_MS)
        self._frames.timeout.connect(self._send_frame)
        widget.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Show:
            self._send_frame()
            self._frames.start()
        elif event.type() == QEvent.Type.Hide:
            self._frames.stop()
            self.surface.hide()
        return False

    def _send_frame(self) -> None:
        scale = math.ceil(self.widget.devicePixelRatioF())  # a fractional scale is drawn at the next whole one
        image = QImage(self.widget.size() * scale, QImage.Format.Format_ARGB32_Premultiplied)  # wl_shm's ARGB8888
        image.setDevicePixelRatio(scale)
        image.fill(Qt.GlobalColor.transparent)
        self.widget.render(image, QPoint(), QRegion(), QWidget.RenderFlag.DrawChildren)
        self.surface.show(image.constBits(), image.width(), image.height(), scale)

    def _read(self) -> None:
        try:
            self.surface.read()
        except RuntimeError as error:  # the compositor closed the connection: the overlay is gone for good
            log.warning("the overlay's Wayland connection is lost: %s", error)
            self._reader.setEnabled(False)
            self._frames.stop()
            self.widget.removeEventFilter(self)
