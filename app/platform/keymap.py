"""Binding the characters a typed delivery needs, and the keyboard lacks, to spare X keycodes.

xdotool types a character missing from the keyboard map by remapping a spare keycode just before its
keystroke and undoing that right after. A target app reads the new map only when it gets to the
MappingNotify, and if it is busy by then the map has already changed back: the character is lost
("déjà" arrives as "dj", most of the time on a loaded machine; docs/PERFORMANCE.md: typed characters
missing from the keyboard map). So before
xdotool starts, each such character gets a spare keycode of its own, in one batch, and keeps it until
no typed delivery has run for a while: xdotool then finds every character in the map and never
remaps, and the target reads one map that stays put while the keystrokes arrive.

python-xlib (which pynput's X11 backend also uses) does the X calls: xdotool has no command for this
and xmodmap is not installed everywhere.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


KEYSYM_NAMES = {
    "space": "space", "enter": "Return", "tab": "Tab", "esc": "Escape", "backspace": "BackSpace",
    "delete": "Delete", "insert": "Insert", "home": "Home", "end": "End", "page_up": "Prior", "page_down": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "pause": "Pause", "print_screen": "Print",
    "scroll_lock": "Scroll_Lock", "menu": "Menu", "caps_lock": "Caps_Lock", "num_lock": "Num_Lock",
} | {f"f{i}": f"F{i}" for i in range(1, 25)}  # fmt: skip
"""Sayso's names of named keys (``app.hotkeys``) -> their X keysym names, which xkb shares."""


def keysym(char: str) -> int:
    """The X keysym of a character: Latin-1 keysyms are the code point, the rest are 0x01000000 + it."""
    code = ord(char)
    return code if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF else 0x01000000 | code


class SpareKeycodes:
    """Spare keycodes bound to characters until ``release``; one X connection while any are bound."""

    def __init__(self) -> None:
        self._display = None
        self._bound: dict[int, int] = {}  # keysym -> keycode

    def bind(self, text: str) -> bool:
        """Give each character of ``text`` that the map lacks a keycode; False when some still lack one.

        One empty keycode is always left for xdotool's own remapping of whatever could not be bound.
        Control characters are skipped: xdotool types "\\n" and "\\t" as Return and Tab.
        """
        wanted = [keysym(char) for char in dict.fromkeys(text) if char.isprintable()]
        try:
            if self._display is None:
                from Xlib import display as xdisplay

                self._display = xdisplay.Display()
            first = self._display.display.info.min_keycode
            rows = self._display.get_keyboard_mapping(first, self._display.display.info.max_keycode - first + 1)
            present = {symbol for row in rows for symbol in row if symbol}
            missing = [symbol for symbol in wanted if symbol not in present]
            spare = [first + index for index, row in enumerate(rows) if not any(row)][1:]
            for symbol, code in zip(missing, spare):
                self._display.change_keyboard_mapping(code, [(symbol, symbol)])
                self._bound[symbol] = code
            self._display.sync()
        except Exception as error:  # noqa: BLE001 - no X display or no Xlib: xdotool remaps on its own
            log.warning("delivery: couldn't bind characters to spare keys (%s); xdotool will remap", error)
            return False
        return len(missing) <= len(spare)

    def release(self) -> None:
        """Give the bound keycodes back (empty again) and close the X connection."""
        if self._display is None:
            return
        try:
            for code in self._bound.values():
                self._display.change_keyboard_mapping(code, [(0, 0)])
            self._display.sync()
            self._display.close()
        except Exception as error:  # noqa: BLE001 - the X server went away: nothing is left to undo
            log.info("delivery: releasing spare keys failed (%s)", error)
        self._display, self._bound = None, {}
