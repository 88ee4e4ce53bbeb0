"""The global push-to-talk shortcut: a chord of keys ("ctrl+space", "alt_r", "ctrl+alt+f9").

On X11, pynput's listener (the RECORD extension) sees every key press and release on the display, so
holding the chord works in any app; the chord's key is also grabbed (``app.key_grab``) so that the
focused app doesn't receive it. pynput is imported only when the listener starts because it raises
ImportError where there is no X display. On Wayland no client may watch the keyboard:
the desktop's GlobalShortcuts portal binds the chord (``app.portal_shortcut``); on sway, which has no such
portal, sway's own bindings do, added through its IPC (``app.sway_shortcut``); elsewhere the user binds
``sayso --toggle`` to a shortcut in the desktop's settings (``WAYLAND_HINT``).

Key names: modifiers ``ctrl alt shift super`` match either side, ``ctrl_l``/``ctrl_r`` (etc.) only one;
named keys are pynput's (``space enter tab esc f1..f24 page_up ...``); anything else is one character.
"""

from __future__ import annotations

import logging
import os
import threading

from PySide6.QtCore import QObject, Signal

from sayso.app.platform import portal_shortcut, sway_shortcut
from sayso.app.platform.key_grab import KeyGrab
from sayso.app.platform.portal_shortcut import PortalShortcut
from sayso.app.platform.sway_shortcut import SwayShortcut

log = logging.getLogger(__name__)

MODIFIERS = ("ctrl", "alt", "shift", "super")
_SIDED = {f"{m}_{side}" for m in MODIFIERS for side in "lr"}
_NAMED = {
    "space", "enter", "tab", "esc", "backspace", "delete", "insert", "home", "end", "page_up", "page_down",
    "up", "down", "left", "right", "caps_lock", "pause", "print_screen", "scroll_lock", "menu", "num_lock",
} | {f"f{i}" for i in range(1, 25)}  # fmt: skip
_ALIASES = {
    "control": "ctrl", "ctl": "ctrl", "meta": "super", "cmd": "super", "win": "super", "windows": "super",
    "option": "alt", "altgr": "alt_r", "alt_gr": "alt_r", "return": "enter", "escape": "esc", "del": "delete",
    "ins": "insert", "pgup": "page_up", "pgdown": "page_down", "pageup": "page_up", "pagedown": "page_down",
    "capslock": "caps_lock", "print": "print_screen", "backtab": "tab",
}  # fmt: skip
# Releases that a press of the same key follows within this time are X's key auto-repeat, not the user.
RELEASE_DEBOUNCE_MS = 40

WAYLAND_HINT = (
    "This Wayland desktop has no global-shortcuts portal (and isn't sway, whose own bindings Sayso would "
    "use), so Sayso can't watch a shortcut. Open your desktop's keyboard settings and add a custom shortcut "
    "that runs “sayso --toggle”: press it to start dictating, press it again to stop."
)
PORTAL_DESCRIPTION = "Hold to dictate"


def parse_hotkey(text: str) -> frozenset[str]:
    """ "Ctrl + Space" -> {"ctrl", "space"}. Raises ValueError with a message for the settings page."""
    keys = []
    for part in text.split("+"):
        name = part.strip().lower().replace(" ", "_")
        name = _ALIASES.get(name, name)
        if not name:
            raise ValueError(f"“{text}” has an empty key name.")
        if name not in MODIFIERS and name not in _SIDED and name not in _NAMED and len(name) != 1:
            raise ValueError(f"“{part.strip()}” is not a key Sayso knows.")
        keys.append(name)
    if not keys:
        raise ValueError("The shortcut is empty.")
    return frozenset(keys)


def format_hotkey(text: str) -> str:
    """A shortcut as people write it: "ctrl+space" -> "Ctrl+Space", "alt_r" -> "Right Alt"."""
    try:
        keys = parse_hotkey(text)
    except ValueError:
        return text

    def label(key: str) -> str:
        if key in _SIDED:
            base, side = key.split("_")
            return ("Left " if side == "l" else "Right ") + base.capitalize()
        return key.replace("_", " ").title() if len(key) > 1 else key.upper()

    order = {m: i for i, m in enumerate(MODIFIERS)}  # modifiers first, in the usual order
    ranked = sorted(keys, key=lambda k: (order.get(k.split("_")[0], len(order)), k))
    return "+".join(label(k) for k in ranked)


def _matches(chord_key: str, held: str) -> bool:
    return held == chord_key or (chord_key in MODIFIERS and held in (f"{chord_key}_l", f"{chord_key}_r"))


class ChordTracker:
    """Follows presses and releases and says when the chord becomes fully held or stops being held."""

    def __init__(self, chord: frozenset[str]):
        self.chord = chord
        self.held: set[str] = set()
        self.active = False

    def _complete(self) -> bool:
        return all(any(_matches(k, h) for h in self.held) for k in self.chord)

    def press(self, name: str) -> bool:
        """True when this press completes the chord."""
        self.held.add(name)
        if not self.active and self._complete():
            self.active = True
            return True
        return False

    def release(self, name: str) -> bool:
        """True when this release breaks a held chord."""
        self.held.discard(name)
        if self.active and not self._complete():
            self.active = False
            return True
        return False


def display_server() -> str:
    """ "wayland", "x11", or "" (no graphical session: tests, ssh)."""
    if os.environ.get("XDG_SESSION_TYPE") == "wayland" or os.environ.get("WAYLAND_DISPLAY"):
        return "wayland"
    return "x11" if os.environ.get("DISPLAY") else ""


def wayland_shortcut() -> type[PortalShortcut] | type[SwayShortcut] | None:
    """What binds the shortcut in this Wayland session: the desktop's portal where it has one, else sway's
    own bindings on sway; None where neither can (the user binds ``sayso --toggle``)."""
    if portal_shortcut.available():
        return PortalShortcut
    if sway_shortcut.available():
        return SwayShortcut
    return None


def shortcut_route() -> tuple[bool, str]:
    """How the shortcut reaches Sayso in this session, as Settings and ``sayso doctor`` say it: whether it
    works, and how or why not."""
    server = display_server()
    if server == "wayland":
        binder = wayland_shortcut()
        if binder is PortalShortcut:
            return True, ("Wayland: the shortcut goes through your desktop's global-shortcuts portal, so hold to "
                          "talk works; the desktop may ask you to confirm it the first time.")  # fmt: skip
        if binder is SwayShortcut:
            return True, ("sway: Sayso adds the shortcut to sway's own bindings (through sway's IPC), so hold "
                          "to talk works and the app you are typing in never receives it.")  # fmt: skip
        return False, WAYLAND_HINT
    if server == "":
        return False, ("No desktop session (DISPLAY and WAYLAND_DISPLAY are unset): the shortcut needs one. "
                       "`sayso transcribe FILE` works without it.")  # fmt: skip
    return True, "X11: Sayso takes the shortcut for itself, so the app you are typing in never receives it."


def _key_name(keyboard, listener, key) -> str:
    """pynput's key -> our name: sided modifiers as ctrl_l/alt_r/..., characters lowercased."""
    if isinstance(key, keyboard.Key):
        name = key.name.replace("cmd", "super")
        return "alt_r" if name == "alt_gr" else name
    key = listener.canonical(key)
    if key.char:
        return key.char.lower()
    return f"vk{key.vk}"


class HotkeyListener(QObject):
    """Emits ``pressed`` when the chord goes down and ``released`` when it comes up.

    The chord is tracked on pynput's thread, where key auto-repeat is filtered out before anything
    reaches Qt. X repeats a held key as presses, and on some servers as release+press pairs; a release
    only counts once no press of that same key followed within RELEASE_DEBOUNCE_MS. (Repeated presses
    of the held key can still arrive just after another chord key's release: X RECORD delivers in
    batches. They don't revive the chord because its other key is no longer down.) Doing this on the GUI
    thread instead would misjudge repeats whenever the GUI is busy for longer than the debounce.
    """

    pressed = Signal()
    released = Signal()
    bound = Signal(str)  # the portal or sway bound the shortcut (the trigger it reports)
    failed = Signal(str)  # the portal or sway couldn't bind the shortcut (a message for the user)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._wayland: PortalShortcut | SwayShortcut | None = None  # the portal's binding, or sway's
        self._listener = None
        self._grab: KeyGrab | None = None
        self._tracker: ChordTracker | None = None
        self._lock = threading.Lock()
        self._pending_release: threading.Timer | None = None
        self._released_key = ""  # the key whose release is pending
        self._generation = 0  # which start() the running listener belongs to

    @property
    def running(self) -> bool:
        return self._listener is not None or self._wayland is not None

    def start(self, hotkey: str) -> None:
        """Watch ``hotkey``; raises ValueError (bad shortcut) or RuntimeError (no way to watch keys here)."""
        chord = parse_hotkey(hotkey)
        self.stop()
        if display_server() == "wayland":
            self._start_wayland(chord)
            return
        if not os.environ.get("DISPLAY"):
            raise RuntimeError("No X display: the global shortcut is off. Use the Record button instead.")
        try:
            from pynput import keyboard
        except ImportError as error:
            raise RuntimeError(f"The global shortcut is unavailable: {error}") from error
        self._tracker = ChordTracker(chord)
        self._generation += 1
        generation = self._generation
        listener = keyboard.Listener(
            on_press=lambda key: self.key_event(_key_name(keyboard, listener, key), True, generation),
            on_release=lambda key: self.key_event(_key_name(keyboard, listener, key), False, generation),
        )
        listener.daemon = True
        listener.start()
        listener.wait()  # returns once the X RECORD context is live, so no press is missed after start()
        self._listener = listener
        self._grab = KeyGrab.take(chord, MODIFIERS)
        log.info("hotkeys: watching %s%s", format_hotkey(hotkey), " (grabbed)" if self._grab else "")

    def _start_wayland(self, chord: frozenset[str]) -> None:
        """The portal where the desktop has one, else sway's bindings on sway (``wayland_shortcut``)."""
        binder = wayland_shortcut()
        if binder is None:
            raise RuntimeError(WAYLAND_HINT)
        self._wayland = self._forwarded(binder(self))
        if binder is PortalShortcut:
            self._wayland.start(chord, PORTAL_DESCRIPTION)
        else:
            self._wayland.start(chord)

    def _forwarded(self, shortcut: PortalShortcut | SwayShortcut) -> PortalShortcut | SwayShortcut:
        """``shortcut`` with its signals passed on as this listener's."""
        shortcut.pressed.connect(self.pressed)
        shortcut.released.connect(self.released)
        shortcut.bound.connect(self.bound)
        shortcut.failed.connect(self.failed)
        return shortcut

    def stop(self) -> None:
        if self._wayland is not None:
            self._wayland.stop()
            self._wayland.deleteLater()
            self._wayland = None
        if self._listener is not None:
            # pynput's X listener only notices stop() at the next key event, so its thread may linger
            # until then; the generation check keeps its last events away from a newer listener.
            self._listener.stop()
            self._listener = None
        if self._grab is not None:
            self._grab.release()
            self._grab = None
        with self._lock:
            if self._pending_release is not None:
                self._pending_release.cancel()
            self._pending_release = None
            self._tracker = None

    def key_event(self, name: str, down: bool, generation: int | None = None) -> None:
        """One key press or release (called on pynput's thread; public so tests can feed events)."""
        with self._lock:
            tracker = self._tracker
            if tracker is None or generation not in (None, self._generation):
                return
            if down:
                if self._pending_release is not None and name == self._released_key:
                    self._pending_release.cancel()  # auto-repeat: the chord never really came up
                    self._pending_release = None
                    tracker.press(name)
                elif tracker.press(name):
                    self.pressed.emit()
            elif tracker.release(name):
                timer = threading.Timer(RELEASE_DEBOUNCE_MS / 1000, lambda: self._confirm_release(timer))
                timer.daemon = True
                self._pending_release, self._released_key = timer, name
                timer.start()

    def _confirm_release(self, timer: threading.Timer) -> None:
        with self._lock:
            if self._pending_release is not timer:
                return  # cancelled by a repeat press (cancel() can't stop a timer that already fired)
            self._pending_release = None
        self.released.emit()
