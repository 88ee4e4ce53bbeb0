"""A stand-in for the user's editor: a Qt window with one text field, run as its own process.

    python target_window.py TITLE

Prints a JSON line to stdout whenever the text changes: {"t": <time.time()>, "text": "..."}, so a test
can see what arrived and when, and {"t": ..., "key": "Ctrl+V"} for every key press the field receives, so
a test can see that a shortcut never reached it. Reads commands on stdin, one per line:
    clipboard TEXT     put TEXT on the clipboard (this process owns it)
    clipboard-image TEXT   put an image, TEXT and a type of this app's own on the clipboard at once
    print-clipboard    print {"clipboard": "...", "formats": [...], "image": [width, height, "#rrggbb"],
                       "own": "..."}: the text, every type offered, the image and the own type's bytes
    quit
"""

from __future__ import annotations

import json
import sys
import threading
import time

from PySide6.QtCore import QEvent, QMimeData, QObject, Signal
from PySide6.QtGui import QColor, QImage, QKeySequence
from PySide6.QtWidgets import QApplication, QPlainTextEdit

OWN_TYPE = "application/x-sayso-test"
IMAGE_COLOR = "#3366cc"


class Commands(QObject):
    line = Signal(str)


class KeyReporter(QObject):
    """Reports each key press its widget receives, and lets the widget have it."""

    def __init__(self, emit):
        super().__init__()
        self.emit = emit

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.KeyPress:
            self.emit({"t": time.time(), "key": QKeySequence(event.keyCombination()).toString()})
        return False


def main() -> int:
    title = sys.argv[1]
    app = QApplication(sys.argv[:1])
    editor = QPlainTextEdit()
    editor.setWindowTitle(title)
    editor.resize(640, 240)

    def emit(payload: dict) -> None:
        print(json.dumps(payload), flush=True)

    editor.textChanged.connect(lambda: emit({"t": time.time(), "text": editor.toPlainText()}))
    keys = KeyReporter(emit)
    editor.installEventFilter(keys)
    commands = Commands()

    def handle(line: str) -> None:
        name, _, arg = line.partition(" ")
        if name == "clipboard":
            app.clipboard().setText(arg)
        elif name == "clipboard-image":
            image = QImage(24, 16, QImage.Format.Format_RGB32)
            image.fill(QColor(IMAGE_COLOR))
            content = QMimeData()
            content.setText(arg)
            content.setImageData(image)
            content.setData(OWN_TYPE, b"copied in the target")
            app.clipboard().setMimeData(content)
        elif name == "print-clipboard":
            content, image = app.clipboard().mimeData(), app.clipboard().image()
            emit({
                "clipboard": content.text(),
                "formats": content.formats(),
                "image": [image.width(), image.height(), image.pixelColor(0, 0).name()] if not image.isNull() else None,
                "own": bytes(content.data(OWN_TYPE)).decode(),
            })  # fmt: skip
        elif name == "quit":
            app.quit()

    commands.line.connect(handle)

    def read_stdin() -> None:
        for line in sys.stdin:
            commands.line.emit(line.rstrip("\n"))
        commands.line.emit("quit")

    threading.Thread(target=read_stdin, daemon=True).start()
    editor.show()
    emit({"ready": True})
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
