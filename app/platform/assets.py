"""Icons and sounds from ``sayso.resources`` (the repository's ``resources/``), tinted and cached for the
widgets.

UI icons are 24×24 line drawings whose SVG says ``currentColor``; ``icon(name, color)`` substitutes a
real color and renders crisp pixmaps at 1× and 2×, so one drawing serves every state and theme.
"""

from __future__ import annotations

import importlib.resources
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

RESOURCES = Path(importlib.resources.files("sayso.resources"))

# Background gradients of the app icon per state: idle (indigo), recording (red), transcribing (amber).
_STATE_COLORS = {
    "idle": ("#6366F1", "#8B5CF6"),
    "recording": ("#EF4444", "#DC2626"),
    "transcribing": ("#F59E0B", "#D97706"),
}


def resource(name: str) -> Path:
    """Path of a file in resources/ (start.wav, sayso.svg, icons/mic.svg, ...)."""
    return RESOURCES / name


def _render(svg: bytes, size: int) -> QPixmap:
    renderer = QSvgRenderer(QByteArray(svg))
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return QPixmap.fromImage(image)


@lru_cache(maxsize=None)
def icon(name: str, color: str = "#4B5563", size: int = 20) -> QIcon:
    """A UI icon from resources/icons/<name>.svg drawn in ``color`` (1× and 2× pixmaps)."""
    svg = (RESOURCES / "icons" / f"{name}.svg").read_bytes().replace(b"currentColor", color.encode())
    result = QIcon()
    for scale in (1, 2):
        pixmap = _render(svg, size * scale)
        pixmap.setDevicePixelRatio(scale)
        result.addPixmap(pixmap)
    return result


def pixmap(name: str, color: str, size: int) -> QPixmap:
    """One pixmap of ``icon(name, color)`` at ``size`` logical pixels."""
    return icon(name, color, size).pixmap(QSize(size, size))


@lru_cache(maxsize=None)
def app_icon(state: str = "idle") -> QIcon:
    """The Sayso icon; ``state`` recolors its background for the tray (idle, recording, transcribing)."""
    svg = (RESOURCES / "sayso.svg").read_bytes()
    for old, new in zip(_STATE_COLORS["idle"], _STATE_COLORS[state], strict=True):
        svg = svg.replace(old.encode(), new.encode())
    result = QIcon()
    for size in (16, 22, 24, 32, 48, 64, 128, 256):
        result.addPixmap(_render(svg, size))
    return result
