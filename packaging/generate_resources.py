"""Regenerate files of resources/: PNG renders of sayso.svg and the two sound cues.

Run with the project's Python (``python packaging/generate_resources.py``) after changing the icon or the cue
recipe; the outputs are committed so that the app needs neither step at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile

HERE = Path(__file__).resolve().parents[1] / "resources"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
CUE_RATE = 48000


def render_icon_pngs() -> None:
    """sayso.svg as sayso-<size>.png for every size a desktop or tray asks for."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(HERE / "sayso.svg"))
    for size in ICON_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        image.save(str(HERE / f"sayso-{size}.png"))
    del app


def _note(freq: float, seconds: float) -> np.ndarray:
    """A soft bell-like note: sine plus a quiet octave, 4 ms attack, exponential decay."""
    t = np.arange(int(seconds * CUE_RATE)) / CUE_RATE
    tone = np.sin(2 * np.pi * freq * t) + 0.2 * np.sin(4 * np.pi * freq * t)
    envelope = np.minimum(t / 0.004, 1.0) * np.exp(-t / (seconds / 3.5))
    return tone * envelope


def write_cues() -> None:
    """start.wav rises (E5 then A5), stop.wav falls (A5 then E5); each about 0.16 s, peak -12 dBFS."""
    low, high = 659.25, 880.0
    for name, notes in (("start", (low, high)), ("stop", (high, low))):
        pcm = np.concatenate([_note(notes[0], 0.07), _note(notes[1], 0.09)])
        pcm *= 0.25 / np.abs(pcm).max()
        soundfile.write(str(HERE / f"{name}.wav"), pcm.astype(np.float32), CUE_RATE, subtype="PCM_16")


if __name__ == "__main__":
    render_icon_pngs()
    write_cues()
