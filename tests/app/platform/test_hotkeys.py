"""The global shortcut: parsing, chord tracking, auto-repeat filtering, and real X key events."""

import os
import subprocess
import time

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from sayso.app.platform.hotkeys import ChordTracker, HotkeyListener, format_hotkey, parse_hotkey  # noqa: E402
from e2e.fixtures import portal, session_bus, x_display  # noqa: E402, F401


@pytest.mark.parametrize(
    "text, keys",
    [
        ("ctrl+space", {"ctrl", "space"}),
        ("Control + Alt + F9", {"ctrl", "alt", "f9"}),
        ("alt_r", {"alt_r"}),
        ("Meta+PgUp", {"super", "page_up"}),
        ("ctrl+A", {"ctrl", "a"}),
    ],
)
def test_parse(text, keys):
    assert parse_hotkey(text) == frozenset(keys)


@pytest.mark.parametrize("bad", ["", "ctrl+", "ctrl+hyper", "banana"])
def test_parse_rejects_with_a_message(bad):
    with pytest.raises(ValueError, match="."):
        parse_hotkey(bad)


def test_format_puts_modifiers_first():
    assert format_hotkey("space+ctrl") == "Ctrl+Space"
    assert format_hotkey("f9+shift+alt") == "Alt+Shift+F9"
    assert format_hotkey("alt_r") == "Right Alt"


def test_chord_tracker_matches_either_side_of_a_modifier():
    chord = ChordTracker(parse_hotkey("ctrl+space"))
    assert not chord.press("space")
    assert chord.press("ctrl_r")  # complete now
    assert not chord.press("space")  # repeats don't re-trigger
    assert not chord.release("shift_l")  # not part of the chord
    assert chord.release("ctrl_r")
    assert not chord.release("space")


def test_chord_tracker_keeps_sides_when_asked():
    chord = ChordTracker(parse_hotkey("alt_r"))
    assert not chord.press("alt_l")
    assert chord.press("alt_r")


def test_auto_repeat_release_press_pairs_are_not_a_release(qtbot):
    listener = HotkeyListener()
    listener._tracker = ChordTracker(parse_hotkey("ctrl+space"))  # feed events without an X server
    pressed, released = [], []
    listener.pressed.connect(lambda: pressed.append(time.monotonic()))
    listener.released.connect(lambda: released.append(time.monotonic()))
    listener.key_event("ctrl_l", True)
    listener.key_event("space", True)
    for _ in range(5):  # what X sends for a held key without detectable auto-repeat
        listener.key_event("space", False)
        listener.key_event("space", True)
    qtbot.wait(150)
    assert len(pressed) == 1 and released == []
    with qtbot.waitSignal(listener.released, timeout=1000):
        listener.key_event("space", False)
    assert len(pressed) == 1


def test_real_key_presses_on_x(qtbot, x_display):
    listener = HotkeyListener()
    listener.start("ctrl+space")
    thread = listener._listener
    try:
        run = lambda *args: subprocess.run(["xdotool", *args], check=True)  # noqa: E731
        with qtbot.waitSignal(listener.pressed, timeout=5000):
            run("keydown", "ctrl+space")
        released = []
        listener.released.connect(lambda: released.append(1))
        qtbot.wait(800)  # held long enough for X's auto-repeat to kick in
        assert released == []
        with qtbot.waitSignal(listener.released, timeout=5000):
            run("keyup", "ctrl+space")
        qtbot.wait(200)
        assert released == [1]
        pressed = []
        listener.pressed.connect(lambda: pressed.append(1))
        run("key", "ctrl+a")  # another chord with the same modifier
        qtbot.wait(300)
        assert pressed == []
    finally:
        listener.stop()
        subprocess.run(["xdotool", "key", "shift"])  # pynput's thread notices stop() at the next key
        thread.join(5)


def test_wayland_without_a_portal_asks_for_a_desktop_shortcut(monkeypatch, session_bus):
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.delenv("SWAYSOCK", raising=False)  # not sway either (tests/e2e: hold to talk on sway)
    with pytest.raises(RuntimeError, match="sayso --toggle"):
        HotkeyListener().start("ctrl+space")


def test_wayland_hold_to_talk_through_the_portal(qtbot, monkeypatch, portal):
    """A real session bus, and a portal double speaking GlobalShortcuts: the chord is bound with its
    trigger, Activated / Deactivated are press and release, and the session is closed on stop()."""
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    listener = HotkeyListener()
    with qtbot.waitSignal(listener.bound, timeout=20_000) as bound:
        listener.start("ctrl+alt+f9")
    assert bound.args == ["ALT+CTRL+F9"] and portal.wait_for("bound") == [["dictate", "ALT+CTRL+F9"]]
    try:
        for _ in range(2):
            with qtbot.waitSignal(listener.pressed, timeout=5000):
                portal.press("activate")
            with qtbot.waitSignal(listener.released, timeout=5000):
                portal.press("deactivate")
        with qtbot.waitSignal(listener.pressed, timeout=5000):  # a portal that sends no release:
            portal.press("activate")
        with qtbot.waitSignal(listener.released, timeout=5000):  # the next press ends the dictation
            portal.press("activate")
    finally:
        listener.stop()
    assert portal.wait_for("closed").startswith("/org/freedesktop/portal/desktop/session/")


class KeyWitness:
    """A second X client holding the keyboard focus, recording the keys it receives."""

    def __init__(self):
        from Xlib import X, display

        self.server = display.Display()
        root = self.server.screen().root
        self.window = root.create_window(0, 0, 200, 100, 0, X.CopyFromParent,
                                         event_mask=X.KeyPressMask | X.StructureNotifyMask)
        self.window.map()
        while self.server.next_event().type != X.MapNotify:
            pass
        self.window.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.server.sync()

    def keys(self, settle: float = 0.4) -> set[str]:
        """The keys pressed in it since the last call, by X keysym name ("a", "space", "F9")."""
        from Xlib import X, XK

        time.sleep(settle)
        pressed = set()
        while self.server.pending_events():
            event = self.server.next_event()
            if event.type == X.KeyPress:
                pressed.add(self.server.keycode_to_keysym(event.detail, 0))
        return {name for name in ("a", "space", "F9") if XK.string_to_keysym(name) in pressed}

    def close(self) -> None:
        self.window.destroy()
        self.server.close()


def test_the_shortcut_is_taken_from_the_focused_app(qtbot, x_display):
    """The chord's key is grabbed, Num Lock or Caps Lock on or not; other keys still reach the app; on
    stop() the key is the app's again."""
    run = lambda *args: subprocess.run(["xdotool", *args], check=True)  # noqa: E731
    witness = KeyWitness()
    listener = HotkeyListener()
    listener.start("ctrl+space")
    thread = listener._listener
    try:
        for lock in (None, "Num_Lock", "Caps_Lock"):
            if lock:
                run("key", lock)
            with qtbot.waitSignal(listener.pressed, timeout=5000):
                run("keydown", "ctrl+space")
            with qtbot.waitSignal(listener.released, timeout=5000):
                run("keyup", "ctrl+space")
            run("key", "a")
            if lock:
                run("key", lock)
            assert witness.keys() == {"a"}, lock
        listener.start("ctrl+f9")  # a new shortcut gives the old one's key back
        run("key", "ctrl+space")
        assert witness.keys() == {"space"}
    finally:
        listener.stop()
        subprocess.run(["xdotool", "key", "shift"])  # pynput's thread notices stop() at the next key
        thread.join(5)
    run("key", "ctrl+F9")
    assert witness.keys() == {"F9"}
    witness.close()
