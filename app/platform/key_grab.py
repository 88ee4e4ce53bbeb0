"""Taking the shortcut's key from the focused app on X11: a passive grab (XGrabKey) on the root window.

The hotkey listener watches key events through X RECORD, which sees them whether or not they are
grabbed; the grab only makes sure the app that has the focus never receives the shortcut (a Ctrl+Space
there opens an IDE's completion or switches an input method). X matches a grab's modifiers exactly,
so the grab is taken four times: as is, with Caps Lock, with Num Lock, and with both.

A chord of modifiers only (``alt_r``, ``ctrl+shift``) is not grabbed: taking a modifier from every
app would break it for them. A key that another client has grabbed already can't be taken (X answers
BadAccess): the shortcut still works, and the log says the other app sees it too.

The grab's connection reads (and drops) the events the grab routes to it on a thread of its own, so
they don't pile up in the X server's queue for it.
"""

from __future__ import annotations

import logging
import select
import threading

from sayso.app.platform.keymap import KEYSYM_NAMES, keysym

log = logging.getLogger(__name__)

_UNGRABBABLE = {"caps_lock", "num_lock"}  # lock keys: grabbing them would take the lock from every app
POLL_SECONDS = 0.2  # how soon the event thread notices release()


class KeyGrab:
    """The chord's one non-modifier key, grabbed with its modifiers until ``release``."""

    def __init__(self, display, keycode: int, modifiers: list[int]):
        self._display = display
        self._keycode = keycode
        self._modifiers = modifiers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="key-grab", daemon=True)
        self._thread.start()

    @classmethod
    def take(cls, chord: frozenset[str], modifier_names: tuple[str, ...]) -> KeyGrab | None:
        """Grab ``chord`` (names as ``app.hotkeys.parse_hotkey`` gives them); None where it isn't grabbed
        (module docstring). ``modifier_names``: the names of the modifiers, either side."""
        from Xlib import X, XK, display, error

        keys = [k for k in chord if k.split("_")[0] not in modifier_names]
        if len(keys) != 1 or keys[0] in _UNGRABBABLE:
            return None
        key = keys[0]
        masks = {"ctrl": X.ControlMask, "shift": X.ShiftMask, "alt": X.Mod1Mask, "super": X.Mod4Mask}
        modifiers = 0
        for name in chord - {key}:
            modifiers |= masks[name.split("_")[0]]
        try:
            server = display.Display()
        except Exception as problem:  # noqa: BLE001 - python-xlib raises several kinds; the listener still works
            log.warning("hotkeys: can't open the display to grab the shortcut (%s)", problem)
            return None
        symbol = XK.string_to_keysym(KEYSYM_NAMES[key]) if key in KEYSYM_NAMES else keysym(key)
        keycode = server.keysym_to_keycode(symbol)
        if not keycode:
            server.close()
            log.info("hotkeys: no key on this keyboard makes %s; not grabbed", key)
            return None
        num_lock = _num_lock_mask(server)
        variants = [modifiers | extra for extra in sorted({0, X.LockMask, num_lock, X.LockMask | num_lock})]
        refused = error.CatchError(error.BadAccess)
        root = server.screen().root
        for mask in variants:
            root.grab_key(keycode, mask, True, X.GrabModeAsync, X.GrabModeAsync, onerror=refused)
        server.sync()
        if refused.get_error():
            for mask in variants:
                root.ungrab_key(keycode, mask)
            server.close()
            log.warning("hotkeys: another app has grabbed this shortcut; it sees the key too")
            return None
        return cls(server, keycode, variants)

    def release(self) -> None:
        """Give the key back to the other apps (on quit, and before a new shortcut is grabbed)."""
        self._stop.set()
        self._thread.join()
        root = self._display.screen().root
        for mask in self._modifiers:
            root.ungrab_key(self._keycode, mask)
        self._display.sync()
        self._display.close()

    def _drain(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._display.fileno()], [], [], POLL_SECONDS)
            if ready and not self._stop.is_set():
                while self._display.pending_events():
                    self._display.next_event()


def _num_lock_mask(server) -> int:
    """The modifier bit Num Lock sets on this server (Mod2 on most; 0 if no key is Num Lock)."""
    from Xlib import XK

    num_lock = server.keysym_to_keycode(XK.string_to_keysym("Num_Lock"))
    for index, keycodes in enumerate(server.get_modifier_mapping()):
        if num_lock and num_lock in keycodes:
            return 1 << index
    return 0
