"""Putting the text into the app the user was in: clipboard paste or typed keystrokes, with fallback.

The target window is read when the shortcut goes down and read again just before delivery; if the user
has since moved to another window the text is not pasted there (it could be a chat or a terminal) but
kept in Sayso and announced. X11 goes through xdotool (``key --clearmodifiers ctrl+v`` after setting the
clipboard, or ``type``); Wayland, where no client may read the focused window, through wl-copy and
wtype (or ydotool).

Paste keeps the user's clipboard: it is saved (every format), replaced by the text, and put back once
the target has had time to fetch it. The Qt event loop must keep running during that time because on
X11 the target asks us for the clipboard's content, so every step here is asynchronous (QProcess).
Terminals don't paste on Ctrl+V, so in paste mode a terminal gets the text typed.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QMimeData, QObject, QProcess, QTimer, Signal
from PySide6.QtGui import QGuiApplication

from app.hotkeys import display_server
from app.keymap import SpareKeycodes

log = logging.getLogger(__name__)

CLIPBOARD_RESTORE_MS = 600  # time the target gets to fetch the pasted text before the old clipboard returns
TYPE_DELAY_MS = 4  # between typed keystrokes: fast, yet slow enough for apps that drop bursts
# When spare keycodes run out, xdotool remaps one for each missing character just before it: slower
# typing gives the target more time to read each remap (it still can lose one when busy).
TYPE_DELAY_REMAPPED_MS = 12
SPARE_KEYS_RELEASE_MS = 2000  # after the last typed delivery: the target has read its keystrokes by then
_TERMINALS = {
    "xterm", "uxterm", "urxvt", "rxvt", "gnome-terminal", "gnome-terminal-server", "konsole", "alacritty", "kitty",
    "terminator", "tilix", "xfce4-terminal", "mate-terminal", "lxterminal", "qterminal", "wezterm", "st", "foot",
    "terminology", "sakura", "guake", "tilda", "yakuake", "cool-retro-term", "ptyxis", "kgx", "blackbox",
}  # fmt: skip


@dataclass(frozen=True)
class DeliveryResult:
    delivered: bool
    method: str  # "paste" or "type" when delivered
    message: str = ""  # why it wasn't delivered, for the user


def _run(args: list[str], timeout: float = 2.0) -> str | None:
    """A quick query (xdotool get*, xprop): its stdout, or None when it fails or the tool is missing."""
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def focused_window() -> str | None:
    """The X window that has the keyboard focus (xdotool's decimal id), or None (Wayland, no X, no focus).

    getactivewindow needs a window manager (EWMH); getwindowfocus works without one (bare X, Xvfb).
    """
    if display_server() != "x11" or not shutil.which("xdotool"):
        return None
    return _run(["xdotool", "getactivewindow"]) or _run(["xdotool", "getwindowfocus"]) or None


def window_class(window: str) -> str:
    """The window's WM_CLASS class name, lowercased ("" when unknown)."""
    out = _run(["xprop", "-id", window, "WM_CLASS"]) or ""
    names = [part.strip().strip('"').lower() for part in out.partition("=")[2].split(",")]
    return names[-1] if names and names[-1] else ""


class Delivery(QObject):
    """Delivers text asynchronously; each ``deliver`` call ends with one ``done(DeliveryResult)``."""

    done = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._running: dict[QProcess, tuple[str, Callable[[bool, str], None]]] = {}
        self._spare_keys = SpareKeycodes()
        self._typing = 0  # typed deliveries under way: the spare keys stay bound while any is
        self._release_keys = QTimer(self, singleShot=True, interval=SPARE_KEYS_RELEASE_MS)
        self._release_keys.timeout.connect(self._on_release_keys)

    # ---- target window ------------------------------------------------------------------------------

    def capture_target(self) -> str | None:
        return focused_window()

    # ---- delivery -----------------------------------------------------------------------------------

    def deliver(self, text: str, target: str | None, method: str) -> None:
        """Send ``text`` to ``target`` (None: whatever has focus) by ``method`` ("paste" or "type")."""
        if target is not None and focused_window() != target:
            self._finish(
                DeliveryResult(False, "", "The window changed before the text was ready, so it was kept here.")
            )
            return
        wayland = display_server() == "wayland"
        if method == "paste" and target is not None and window_class(target) in _TERMINALS:
            method = "type"
        order = [method, "type" if method == "paste" else "paste"]
        for candidate in order:
            if self._can(candidate, wayland):
                if candidate != method:
                    log.info("delivery: %s is unavailable here, using %s", method, candidate)
                (self._paste if candidate == "paste" else self._type)(text, wayland)
                return
        tools = "wl-clipboard and wtype" if wayland else "xdotool"
        self._finish(
            DeliveryResult(False, "", f"Can't send text to other apps: install {tools}. The text is kept here.")
        )

    @staticmethod
    def _can(method: str, wayland: bool) -> bool:
        if not wayland:
            return display_server() == "x11" and shutil.which("xdotool") is not None
        if method == "paste":
            return bool(shutil.which("wl-copy") and shutil.which("wl-paste") and shutil.which("wtype"))
        return bool(shutil.which("wtype") or shutil.which("ydotool"))

    def _type(self, text: str, wayland: bool) -> None:
        if wayland:  # wtype and ydotool send their own keymap along with the keys: nothing to bind
            args = ["wtype", "--", text] if shutil.which("wtype") else ["ydotool", "type", "--", text]
            self._start(args, lambda ok, error: self._finish(DeliveryResult(ok, "type", error)))
            return
        self._release_keys.stop()
        self._typing += 1
        delay = TYPE_DELAY_MS if self._spare_keys.bind(text) else TYPE_DELAY_REMAPPED_MS
        args = ["xdotool", "type", "--clearmodifiers", "--delay", str(delay), "--", text]

        def typed(ok: bool, error: str) -> None:
            self._typing -= 1
            self._release_keys.start()
            self._finish(DeliveryResult(ok, "type", error))

        self._start(args, typed)

    def _on_release_keys(self) -> None:
        if not self._typing:
            self._spare_keys.release()

    def _paste(self, text: str, wayland: bool) -> None:
        if wayland:  # Qt's clipboard doesn't reach other Wayland clients reliably; wl-copy does
            saved = _run(["wl-paste", "--no-newline"])
            subprocess.run(["wl-copy", "--", text], timeout=2)
            keys = ["wtype", "-M", "ctrl", "v", "-m", "ctrl"]

            def restore():
                if saved is None:
                    subprocess.run(["wl-copy", "--clear"], timeout=2)
                else:
                    subprocess.run(["wl-copy", "--", saved], timeout=2)

        else:
            clipboard = QGuiApplication.clipboard()
            saved = _copy_mime(clipboard.mimeData())
            clipboard.setText(text)
            keys = ["xdotool", "key", "--clearmodifiers", "ctrl+v"]

            def restore():
                if clipboard.text() != text:
                    return  # the user (or the target) copied something new meanwhile: keep it
                if saved is None:
                    clipboard.clear()
                else:
                    clipboard.setMimeData(saved)

        def after_keys(ok: bool, error: str) -> None:
            def finish():
                restore()
                self._finish(DeliveryResult(ok, "paste", error))

            QTimer.singleShot(CLIPBOARD_RESTORE_MS, finish)

        self._start(keys, after_keys)

    def _start(self, args: list[str], then: Callable[[bool, str], None]) -> None:
        """Run ``args`` without waiting; ``then(ok, error)`` once it has exited.

        The slots are bound methods that find the process through ``sender()``: a lambda that holds the
        QProcess it is connected to crashes PySide6 when Qt deletes that process.
        """
        process = QProcess(self)
        self._running[process] = (args[0], then)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        process.start(args[0], args[1:])

    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        process = self.sender()
        ok = status == QProcess.ExitStatus.NormalExit and code == 0
        error = "" if ok else bytes(process.readAllStandardError()).decode(errors="replace").strip()
        self._complete(process, ok, error)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:  # no finished() follows this one
            self._complete(self.sender(), False, "it could not be started")

    def _complete(self, process: QProcess, ok: bool, error: str) -> None:
        tool, then = self._running.pop(process)
        process.deleteLater()
        then(ok, "" if ok else f"{tool} failed: {error}")

    def _finish(self, result: DeliveryResult) -> None:
        if not result.delivered:
            log.info("delivery: kept in app: %s", result.message)
        self.done.emit(result)


def _copy_mime(source: QMimeData | None) -> QMimeData | None:
    """A deep copy of the clipboard's content in all its formats (None when it is empty)."""
    if source is None or not source.formats():
        return None
    copy = QMimeData()
    for fmt in source.formats():
        copy.setData(fmt, source.data(fmt))
    return copy
