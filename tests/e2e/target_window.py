"""A stand-in for the user's editor: a Qt window with one text field, run as its own process.

    python target_window.py TITLE

Prints a JSON line to stdout whenever the text changes: {"t": <time.time()>, "text": "..."}, so a test
can see what arrived and when. Reads commands on stdin, one per line:
    clipboard TEXT     put TEXT on the clipboard (this process owns it)
    print-clipboard    print {"clipboard": "..."}
    quit
"""

from __future__ import annotations

import json
import sys
import threading
import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QPlainTextEdit


class Commands(QObject):
    line = Signal(str)


def main() -> int:
    title = sys.argv[1]
    app = QApplication(sys.argv[:1])
    editor = QPlainTextEdit()
    editor.setWindowTitle(title)
    editor.resize(640, 240)

    def emit(payload: dict) -> None:
        print(json.dumps(payload), flush=True)

    editor.textChanged.connect(lambda: emit({"t": time.time(), "text": editor.toPlainText()}))
    commands = Commands()

    def handle(line: str) -> None:
        name, _, arg = line.partition(" ")
        if name == "clipboard":
            app.clipboard().setText(arg)
        elif name == "print-clipboard":
            emit({"clipboard": app.clipboard().text()})
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
