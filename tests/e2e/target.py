"""Driving target_window.py: a real text field in another process, on the test's X display, or on a
Wayland compositor when ``env`` says so (there no client can find or focus another's window: the
compositor gives the newest window the focus); and gtk_target_window.py, a GTK 3 text view on Wayland."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e.target_window import OWN_TYPE

PROGRAM = Path(__file__).with_name("target_window.py")
GTK_PROGRAM = Path(__file__).with_name("gtk_target_window.py")


class TargetWindow:
    """Starts the program, finds its X window, and collects what arrives in its text field."""

    def __init__(self, title: str, env: dict[str, str] | None = None):
        self.title = title
        env = {**os.environ, "QT_QPA_PLATFORM": "xcb", **(env or {})}
        self.process = subprocess.Popen(
            self._program(title), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.Queue = queue.Queue()
        self.keys: list[str] = []  # the key presses the field received ("Ctrl+V"), as they came
        threading.Thread(target=self._read, daemon=True).start()
        self.text, self.changed_at = "", 0.0
        if env["QT_QPA_PLATFORM"] == "wayland":
            assert self.lines.get(timeout=60) == {"ready": True}
            self.window = None
            return
        found = subprocess.run(
            ["xdotool", "search", "--sync", "--name", f"^{title}$"], capture_output=True, text=True, timeout=60
        )
        self.window = found.stdout.split()[0]

    def _program(self, title: str) -> list[str]:
        return [sys.executable, str(PROGRAM), title]

    def _read(self) -> None:
        for line in self.process.stdout:
            message = json.loads(line)
            if "key" in message:
                self.keys.append(message["key"])
            else:
                self.lines.put(message)

    def focus(self) -> None:
        subprocess.run(["xdotool", "windowfocus", "--sync", self.window], check=True, timeout=10)

    def wait_for_text(self, predicate, timeout: float) -> str:
        """Wait until the field's text satisfies ``predicate``; returns it (``changed_at``: when it changed)."""
        deadline = time.monotonic() + timeout
        while not predicate(self.text):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{self.title} has {self.text!r} after {timeout} s")
            try:
                message = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if "text" in message:
                self.text, self.changed_at = message["text"], message["t"]
        return self.text

    def command(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def clipboard(self, timeout: float = 10) -> str:
        """The clipboard's text, as this window reads it."""
        return self.clipboard_contents(timeout)["clipboard"]

    def clipboard_contents(self, timeout: float = 10) -> dict:
        """What ``print-clipboard`` prints: the text, the types offered, the image, the window's own type."""
        self.command("print-clipboard")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.lines.get(timeout=timeout)
            if "clipboard" in message:
                return message
            if "text" in message:
                self.text, self.changed_at = message["text"], message["t"]
        raise AssertionError("no clipboard reply")

    def close(self) -> None:
        try:
            self.command("quit")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


class GtkTargetWindow(TargetWindow):
    """A GTK 3 text view on the Wayland compositor of ``env``, run by the distribution's python3, for which
    Debian's python3-gi is built (the project's Python may be another)."""

    def _program(self, title: str) -> list[str]:
        python = shutil.which("python3", path=os.defpath) or "python3"
        has_gtk = "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk"
        if subprocess.run([python, "-c", has_gtk], capture_output=True, timeout=30).returncode != 0:
            pytest.fail(f"{python} has no GTK 3: apt-get install -y python3-gi gir1.2-gtk-3.0")
        return [python, str(GTK_PROGRAM), title]


def copied_in_a_wayland_app(title: str, env: dict[str, str]) -> TargetWindow:
    """A Qt window on the Wayland compositor of ``env`` that has copied text, an image (in every format Qt
    writes) and a type of its own at once, and owns the clipboard. A Wayland app may set the clipboard
    only in answer to input: a key is pressed in it (wtype) first."""
    env = {**os.environ, **env}
    subprocess.run(["wl-copy", "--clear"], env=env, check=True, timeout=10)
    window = TargetWindow(title, env=env)  # opened last, so it has the focus
    deadline = time.monotonic() + 20
    while OWN_TYPE not in subprocess.run(["wl-paste", "--list-types"], env=env, capture_output=True, text=True,
                                         timeout=10).stdout.split():  # fmt: skip
        assert time.monotonic() < deadline, "the Qt app's copy never became the clipboard"
        subprocess.run(["wtype", "-k", "shift_l"], env=env, check=True, timeout=10)
        window.command("clipboard-image what the user copied")
        time.sleep(0.3)
    return window
