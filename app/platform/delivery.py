"""Putting the text into the app the user was in: clipboard paste or typed keystrokes, with fallback.

The target window is read when the shortcut goes down and read again just before delivery; if the user
has since moved to another window the text is not pasted there (it could be a chat or a terminal) but
kept in Sayso and announced. X11 goes through xdotool (``key --clearmodifiers ctrl+v`` after setting the
clipboard, or ``type``); Wayland, where no client may read the focused window, through wl-copy and
wtype (or ydotool). The text reaches every tool on its standard input, never on its command line,
which any local user can read (``ps``).

Paste keeps the user's clipboard: it is saved (every format), replaced by the text, and put back once
the target has had time to fetch it. The Qt event loop must keep running during that time because on
X11 the target asks us for the clipboard's content, so every step here is asynchronous (QProcess).
On Wayland the clipboard is read and set through the compositor's data-control protocol
(``data_control``, on a thread of its own), which keeps every type; a compositor without it (GNOME) gets
wl-paste and wl-copy, which offer one type: there the content's best type is what comes back. A
clipboard that can't be read whole is left as it is and the text typed. Terminals don't paste on
Ctrl+V, so in paste mode a terminal (its X11 class, or its app id on sway) gets the text typed.

A delivery is ``confirmed`` only where Sayso saw the text arrive: on X11 a paste is confirmed when an app
fetched the text from Sayso's clipboard while the paste was under way (every X11 paste is such a
request; a clipboard manager that copies each new clipboard makes one too, which the fetch can't tell
apart). Typed keys and a Wayland paste can't be confirmed (no client may read another's text there): the
result says so, for History and the overlay to tell the user. The clipboard put back through data control is
served from Sayso's memory: when Sayso quits, a keeper process (``clipboard_keeper``) takes it over.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from PySide6.QtCore import QMimeData, QObject, QProcess, QTimer, Signal
from PySide6.QtGui import QGuiApplication

from sayso.app.platform.clipboard_keeper import TAKE_OVER_S, hand_over
from sayso.app.platform.data_control import (
    ClipboardUnreadable,
    Contents,
    DataControlClipboard,
    DataControlUnavailable,
    Selection,
    text_contents,
)
from sayso.app.platform.focus import focused_app, focused_window
from sayso.app.platform.hotkeys import display_server
from sayso.app.platform.keymap import SpareKeycodes

log = logging.getLogger(__name__)

WTYPE_KEYMAP_MS = "100"
"""wtype sends its own keymap before its keys, and a client (Qt's, for one) drops the keys that arrive
before it has applied the keymap: the first typed character, or the whole Ctrl+V. wtype waits this long
(its ``-s``) before the first key."""
WTYPE_PASTE = ["wtype", "-s", WTYPE_KEYMAP_MS, "-M", "ctrl", "v", "-m", "ctrl", "-p", "Control_L"]
"""Ctrl+V, then Ctrl's key let go. wtype's keymap holds only the keys it sends, in the order named, and GTK 3
finds a shortcut's key among a keymap's keys below its highest keycode: with ``v`` alone that highest key, a
GTK 3 app (Mousepad, gedit) never pastes. The release of Control_L, which ends every Ctrl+V on a real
keyboard, puts a key above it."""
CLIPBOARD_RESTORE_MS = 600  # time the target gets to fetch the pasted text before the old clipboard returns
CLIPBOARD_ANSWER_S = 0.5  # time the clipboard's owner gets to say what it holds before a paste is typed instead
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


UNCONFIRMED_TYPED = "Typed, not confirmed: Sayso can't read the window to see that the text arrived."
UNCONFIRMED_WAYLAND_PASTE = "Pasted, not confirmed: Wayland doesn't let Sayso see whether the text arrived."
UNFETCHED_PASTE = ("Ctrl+V was pressed, but the window didn't take the text from the clipboard: "
                   "it may not have arrived. Copy it from History.")


@dataclass(frozen=True)
class DeliveryResult:
    delivered: bool  # the text (or its keys) went to the target
    method: str  # "paste" or "type" when delivered
    message: str = ""  # why it wasn't delivered, or why it isn't confirmed, for the user
    confirmed: bool = False  # Sayso saw the text arrive, not only sent its keys


class Delivery(QObject):
    """Delivers text asynchronously; each ``deliver`` call ends with one ``done(DeliveryResult)``."""

    done = Signal(object)
    _clipboard_answered = Signal(object, object)  # a done data-control Future and the step it goes to

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._running: dict[QProcess, tuple[str, Callable[[bool, str, bytes], None]]] = {}
        self._clipboard = DataControlClipboard()  # the Wayland clipboard, connected on the first paste there
        self._saved: Contents | None = None  # the user's clipboard of the latest paste through data control
        self._clipboard_answered.connect(self._on_clipboard_answered)
        self._spare_keys = SpareKeycodes()
        self._typing = 0  # typed deliveries under way: the spare keys stay bound while any is
        self._release_keys = QTimer(self, singleShot=True, interval=SPARE_KEYS_RELEASE_MS)
        self._release_keys.timeout.connect(self._on_release_keys)

    # ---- target window ------------------------------------------------------------------------------

    def capture_target(self) -> str | None:
        return focused_window()

    # ---- delivery -----------------------------------------------------------------------------------

    def deliver(self, text: str, target: str | None, method: str, app: str | None = None) -> None:
        """Send ``text`` to ``target`` (None: whatever has focus) by ``method`` ("paste" or "type").
        ``app``: the target's class where the caller read it already (``focus.focused_app`` at key-down),
        so the way from key-up to text runs no xprop again; None reads it here."""
        if target is not None and focused_window() != target:
            self._finish(
                DeliveryResult(False, "", "The window changed before the text was ready, so it was kept here.")
            )
            return
        wayland = display_server() == "wayland"
        if method == "paste" and (focused_app(target) if app is None else app) in _TERMINALS:
            method = "type"
        order = [method, "type" if method == "paste" else "paste"]
        for candidate in order:
            if can_deliver(candidate, wayland):
                if candidate != method:
                    log.info("delivery: %s is unavailable here, using %s", method, candidate)
                (self._paste if candidate == "paste" else self._type)(text, wayland)
                return
        tools = "wl-clipboard and wtype" if wayland else "xdotool"
        self._finish(
            DeliveryResult(False, "", f"Can't send text to other apps: install {tools}. The text is kept here.")
        )

    def _type(self, text: str, wayland: bool) -> None:
        typed_text = text.encode()
        if wayland:  # wtype and ydotool send their own keymap along with the keys: nothing to bind
            wtype = ["wtype", "-s", WTYPE_KEYMAP_MS, "-"]
            args = wtype if shutil.which("wtype") else ["ydotool", "type", "--file", "-"]
            self._start(args, lambda ok, error, _: self._finish(_sent("type", ok, error)), typed_text)
            return
        self._release_keys.stop()
        self._typing += 1
        delay = TYPE_DELAY_MS if self._spare_keys.bind(text) else TYPE_DELAY_REMAPPED_MS
        args = ["xdotool", "type", "--clearmodifiers", "--delay", str(delay), "--file", "-"]

        def typed(ok: bool, error: str, _: bytes) -> None:
            self._typing -= 1
            self._release_keys.start()
            self._finish(_sent("type", ok, error))

        self._start(args, typed, typed_text)

    def _on_release_keys(self) -> None:
        if not self._typing:
            self._spare_keys.release()

    def _paste(self, text: str, wayland: bool) -> None:
        if wayland:
            self._paste_wayland(text)
            return
        clipboard = QGuiApplication.clipboard()
        # Sayso answers for a clipboard of its own only once this returns: asking itself would wait in vain.
        if not clipboard.ownsClipboard() and not x11_clipboard_answers():
            log.info("delivery: the clipboard's owner doesn't answer: typing instead, the clipboard left as it is")
            self._type(text, wayland=False)
            return
        saved = _copy_mime(clipboard.mimeData())
        pasted = _FetchedText(text)
        clipboard.setMimeData(pasted)

        def restore():
            if clipboard.text() != text:
                return  # the user (or the target) copied something new meanwhile: keep it
            if saved is None:
                clipboard.clear()
            else:
                clipboard.setMimeData(saved)

        def result(ok: bool, error: str) -> DeliveryResult:
            if not ok:
                return DeliveryResult(False, "paste", error)
            return DeliveryResult(True, "paste", "" if pasted.fetched else UNFETCHED_PASTE, confirmed=pasted.fetched)

        self._press_paste(["xdotool", "key", "--clearmodifiers", "ctrl+v"], restore, result)

    def _press_paste(self, keys: list[str], restore: Callable[[], None],
                     result: Callable[[bool, str], DeliveryResult]) -> None:
        """Press the paste keys, then give the clipboard back once the target has had time to fetch it;
        ``result(ok, error)``: the delivery's result, read before the clipboard is given back."""

        def after_keys(ok: bool, error: str, _: bytes) -> None:
            def finish():
                delivered = result(ok, error)
                restore()
                self._finish(delivered)

            QTimer.singleShot(CLIPBOARD_RESTORE_MS, finish)

        self._start(keys, after_keys)

    def _paste_wayland(self, text: str) -> None:
        """The clipboard read whole through data control, the text set in its place, Ctrl+V pressed with
        wtype, then the clipboard put back (unless another app copied something meanwhile, which stays).
        The text goes on the clipboard from Sayso's own selection rather than through wl-copy: it is
        handed to the target from memory, and the selection tells when another app took the clipboard."""

        def read(answer: Future) -> None:
            try:
                saved = answer.result()
            except DataControlUnavailable as error:
                log.info("delivery: no data control (%s): wl-clipboard keeps one type", error)
                self._paste_wl_clipboard(text)
            except ClipboardUnreadable as error:
                log.info("delivery: the clipboard can't be read (%s): typing instead", error)
                self._type(text, wayland=True)
            else:
                self._when_answered(self._clipboard.put(text_contents(text)), lambda answer: copied(answer, saved))

        def copied(answer: Future, saved: Contents) -> None:
            if answer.exception() is not None:
                self._finish(DeliveryResult(False, "", f"The clipboard can't be set ({answer.exception()}). "
                                                       "The text is kept here."))  # fmt: skip
            else:
                self._saved = saved
                self._press_paste(WTYPE_PASTE, lambda: self._put_back(saved, answer.result()), _wayland_paste)

        self._when_answered(self._clipboard.read(), read)

    def _put_back(self, saved: Contents, pasted: Selection) -> None:
        def put(answer: Future) -> None:
            if answer.exception() is not None:
                log.info("delivery: the clipboard couldn't be put back (%s)", answer.exception())
            elif answer.result() is None:
                log.info("delivery: the clipboard changed after the paste: it stays as it is")

        self._when_answered(self._clipboard.put(saved, over=pasted), put)

    def _when_answered(self, answer: Future, then: Callable[[Future], None]) -> None:
        """``then(answer)`` on the GUI thread once the data-control thread has answered."""
        answer.add_done_callback(lambda done: self._clipboard_answered.emit(done, then))

    def _on_clipboard_answered(self, answer: Future, then: Callable[[Future], None]) -> None:
        then(answer)

    def _paste_wl_clipboard(self, text: str) -> None:
        """wl-paste, wl-copy and wtype one after the other, each a QProcess. The clipboard's content is
        kept in the one type wl-copy can offer back, its best: text if it has text, else an image, else its
        first type. A clipboard that can't be read is left alone: the text is typed instead."""
        if not wl_clipboard_installed():
            log.info("delivery: neither data control nor wl-clipboard reaches the clipboard: typing instead")
            self._type(text, wayland=True)
            return

        def listed(ok: bool, error: str, output: bytes) -> None:
            types = output.decode(errors="replace").split()
            if not ok and "nothing is copied" not in error.lower() and "no selection" not in error.lower():
                log.info("delivery: the clipboard can't be read (%s): typing instead", error)
                self._type(text, wayland=True)
            elif not types:
                copy(None, b"")
            else:
                kind = _best_type(types)
                self._start(["wl-paste", "--no-newline", "--type", kind], lambda ok, error, data: (
                    copy(kind, data) if ok else self._type(text, wayland=True)))

        def copy(kind: str | None, data: bytes) -> None:
            def restore():
                args = ["wl-copy", "--clear"] if kind is None else ["wl-copy", "--type", kind]
                self._start(args, lambda ok, error, _: None if ok else log.info("delivery: %s", error), data)

            def copied(ok: bool, error: str, _: bytes) -> None:
                if ok:
                    self._press_paste(WTYPE_PASTE, restore, _wayland_paste)
                else:
                    self._finish(DeliveryResult(False, "", f"{error}. The text is kept here."))

            self._start(["wl-copy", "--type", "text/plain;charset=utf-8"], copied, text.encode())

        self._start(["wl-paste", "--list-types"], listed)

    def _start(self, args: list[str], then: Callable[[bool, str, bytes], None], stdin: bytes = b"") -> None:
        """Run ``args`` without waiting, ``stdin`` written to its standard input (text goes there, never
        on a command line, where any local user could read it); ``then(ok, error, stdout)`` once it has
        exited.

        The slots are bound methods that find the process through ``sender()``: a lambda that holds the
        QProcess it is connected to crashes PySide6 when Qt deletes that process.
        """
        process = QProcess(self)
        self._running[process] = (args[0], then)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        process.start(args[0], args[1:])
        if stdin:
            process.write(stdin)
        process.closeWriteChannel()

    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        process = self.sender()
        ok = status == QProcess.ExitStatus.NormalExit and code == 0
        error = "" if ok else bytes(process.readAllStandardError()).decode(errors="replace").strip()
        self._complete(process, ok, error, bytes(process.readAllStandardOutput()))

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:  # no finished() follows this one
            self._complete(self.sender(), False, "it could not be started", b"")

    def _complete(self, process: QProcess, ok: bool, error: str, output: bytes) -> None:
        tool, then = self._running.pop(process)
        process.deleteLater()
        then(ok, "" if ok else f"{tool} failed: {error}", output)

    def _finish(self, result: DeliveryResult) -> None:
        if not result.delivered:
            log.info("delivery: kept in app: %s", result.message)
        self.done.emit(result)

    def close(self) -> None:
        """At quit. A selection set through data control ends with Sayso's process: while the clipboard is
        Sayso's (the user's contents put back, or the text in their place as a paste is under way), a
        keeper process takes the user's contents over, so they outlive Sayso."""
        held = self._held_clipboard() if self._saved else None  # {}: nothing was copied, and nothing stays
        if held is not None:
            try:
                hand_over(self._saved)
            except OSError as error:
                log.info("delivery: the clipboard keeper can't be started (%s)", error)
            else:
                if not held.replaced.wait(TAKE_OVER_S):
                    log.info("delivery: the clipboard keeper didn't take the clipboard over: it ends with Sayso")
        self._clipboard.close()

    def _held_clipboard(self) -> Selection | None:
        """Sayso's selection where it is the clipboard now; None where another app's is, or no answer came."""
        try:
            return self._clipboard.held().result(timeout=CLIPBOARD_ANSWER_S)
        except (DataControlUnavailable, TimeoutError) as error:
            log.info("delivery: can't tell whether the clipboard is Sayso's (%s)", error or "no answer")
            return None


def _sent(method: str, ok: bool, error: str) -> DeliveryResult:
    """Keys sent that Sayso can't see arrive: delivered where the tool ran, never confirmed."""
    return DeliveryResult(ok, method, error or UNCONFIRMED_TYPED)


def _wayland_paste(ok: bool, error: str) -> DeliveryResult:
    return DeliveryResult(ok, "paste", error or UNCONFIRMED_WAYLAND_PASTE)


class _FetchedText(QMimeData):
    """The text on the clipboard for a paste, noting whether an app fetched it."""

    def __init__(self, text: str):
        super().__init__()
        self.setText(text)
        self.fetched = False

    def retrieveData(self, mime_type: str, preferred_type):
        self.fetched = True
        return super().retrieveData(mime_type, preferred_type)


def can_deliver(method: str, wayland: bool) -> bool:
    """Whether ``method`` ("paste" or "type") has its tools here. On Wayland paste needs wtype for the
    keys; its clipboard (data control, else wl-clipboard) is found when pasting, and without either the
    text is typed."""
    if not wayland:
        return display_server() == "x11" and shutil.which("xdotool") is not None
    if method == "paste":
        return shutil.which("wtype") is not None
    return bool(shutil.which("wtype") or shutil.which("ydotool"))


def wl_clipboard_installed() -> bool:
    """Whether wl-copy and wl-paste are here: the clipboard's way where the compositor has no data
    control, one type kept."""
    return bool(shutil.which("wl-copy") and shutil.which("wl-paste"))


def x11_clipboard_answers(timeout: float = CLIPBOARD_ANSWER_S) -> bool:
    """Whether the X11 clipboard's owner answers a request for its types within ``timeout`` (True when
    nobody owns it: an empty clipboard loses nothing). Qt's clipboard waits many seconds for an owner
    that doesn't answer (a hung app) on the GUI thread, then reads it as empty, and a paste's restore
    would then empty it: such a clipboard is left alone and the text typed."""
    from Xlib import X, display
    from Xlib.error import DisplayError

    try:
        server = display.Display()
    except (DisplayError, OSError) as error:
        log.info("delivery: can't ask the X server for the clipboard (%s)", error)
        return True  # then Qt can't either: nothing of the user's is read or lost
    try:
        clipboard = server.intern_atom("CLIPBOARD")
        if server.get_selection_owner(clipboard) == X.NONE:
            return True
        asker = server.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
        asker.convert_selection(clipboard, server.intern_atom("TARGETS"), server.intern_atom("SAYSO_TYPES"),
                                X.CurrentTime)
        server.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while server.pending_events():
                event = server.next_event()
                if event.type == X.SelectionNotify:
                    return event.property != X.NONE
            time.sleep(0.005)
        return False
    finally:
        server.close()


def _best_type(types: list[str]) -> str:
    """The one type of a Wayland clipboard worth restoring: UTF-8 text, other text, an image, else the first."""
    for wanted in ("text/plain;charset=utf-8", "text/plain", "image/png"):
        if wanted in types:
            return wanted
    return next((t for t in types if t.startswith(("text/", "image/"))), types[0])


def _copy_mime(source: QMimeData | None) -> QMimeData | None:
    """A deep copy of the clipboard's content in all its formats (None when it is empty)."""
    if source is None or not source.formats():
        return None
    copy = QMimeData()
    for fmt in source.formats():
        copy.setData(fmt, source.data(fmt))
    return copy
