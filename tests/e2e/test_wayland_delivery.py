"""Delivery on a real Wayland compositor (a headless sway): text typed by wtype and pasted through the
data-control clipboard into the focused Wayland app (through wl-clipboard where there is no data control),
while every process's command line is read over and over and never holds the text."""

import os
import subprocess
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.command_lines import CommandLineWatch  # noqa: E402
from e2e.fixtures import sway  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import GtkTargetWindow, TargetWindow  # noqa: E402
from sayso.app.platform.data_control import DataControlClipboard  # noqa: E402
from sayso.app.platform.delivery import Delivery  # noqa: E402


def test_text_typed_and_pasted_on_sway_reaches_the_focused_app_and_no_command_line(qtbot, sway, monkeypatch):
    require("wtype")
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SWAYSOCK", raising=False)
    editor = TargetWindow("sayso-wayland-private", env=env)  # opened last, so sway gives it the focus
    try:
        _wait_focused(sway, "sayso-wayland-private")
        secret = "my PIN is 4711, the door code 0815: ünïcödé too."
        delivery = Delivery()
        with CommandLineWatch(secret) as watch:
            for method, expected in (("type", secret), ("paste", secret * 2)):
                result = _delivered(qtbot, delivery, secret, method)
                assert result.delivered, result.message
                assert not result.confirmed and "not confirmed" in result.message  # nobody can tell
                assert editor.wait_for_text(lambda t, e=expected: t == e, timeout=20) == expected
        assert watch.rounds > 10 and watch.found == []
        delivery.close()
    finally:
        editor.close()


def test_where_there_is_no_data_control_wl_clipboard_pastes_and_gives_the_text_back(qtbot, sway, monkeypatch):
    """A compositor without data control (GNOME) can't run here, so the delivery's data-control client is
    pointed at a compositor that isn't there, which is what it meets there: no data control. The paste
    then goes through wl-copy and wl-paste, which keep the clipboard's text (one type)."""
    require("wtype", "wl-copy", "wl-paste")
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    subprocess.run(["wl-copy"], input=b"what the user had copied", check=True, timeout=10)
    editor = TargetWindow("sayso-wayland-wl-copy", env=env)
    try:
        _wait_focused(sway, "sayso-wayland-wl-copy")
        delivery = Delivery()
        delivery._clipboard = DataControlClipboard("sayso-no-compositor-here")
        secret = "pasted through wl-copy, 0815"
        with CommandLineWatch(secret) as watch:
            result = _delivered(qtbot, delivery, secret, "paste")
            assert result.delivered, result.message
            assert editor.wait_for_text(lambda t: t == secret, timeout=20) == secret
        assert watch.rounds > 10 and watch.found == []
        # The restoring wl-copy starts as the delivery ends, its input written by Qt's event loop.
        qtbot.waitUntil(lambda: subprocess.run(["wl-paste", "--no-newline"], capture_output=True, timeout=10).stdout
                        == b"what the user had copied", timeout=5000)  # fmt: skip
    finally:
        editor.close()


def _in_sways_session(sway, monkeypatch) -> dict[str, str]:
    """This test's environment as an app's in the user's sway session: its display and its IPC socket."""
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": "",
           "SWAYSOCK": str(next(sway.folder.glob("sway-ipc.*.sock")))}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _delivered(qtbot, delivery: Delivery, text: str, method: str, target=None):
    """``text`` delivered by ``method`` to ``target`` (the focused window where None), once Delivery says how."""
    with qtbot.waitSignal(delivery.done, timeout=30_000) as done:
        delivery.deliver(text, delivery.capture_target() if target is None else target, method)
    return done.args[0]


def _wait_focused(sway, title: str) -> dict:
    deadline = time.monotonic() + 30
    while not (found := [w for w in sway.windows() if w["name"] == title and w["focused"]]):
        assert time.monotonic() < deadline, sway.windows()
        time.sleep(0.1)
    return found[0]


def test_on_sway_a_terminal_gets_the_text_typed_where_paste_is_asked(qtbot, sway, monkeypatch, tmp_path):
    """foot, a Wayland terminal, pastes on Ctrl+Shift+V, not Ctrl+V: a paste into it is typed, its app id
    read from sway's IPC, and what arrives is the text (a Ctrl+V would have given ^V)."""
    require("wtype", "foot")
    env = _in_sways_session(sway, monkeypatch)
    out = tmp_path / "typed.txt"
    terminal = subprocess.Popen(["foot", "--title", "sayso-foot", "sh", "-c", f"stty -icanon -echo; cat > {out}"],
                                env={**os.environ, **env}, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_focused(sway, "sayso-foot")
        delivery = Delivery()
        text = "Typed into a terminal, 4711."
        result = _delivered(qtbot, delivery, text, "paste")
        assert result.delivered and result.method == "type" and not result.confirmed, result
        qtbot.waitUntil(lambda: out.exists() and out.read_text() == text, timeout=10_000)
    finally:
        terminal.kill()
        terminal.wait()


def test_on_sway_the_target_is_the_focused_window_so_dictations_into_it_join(qtbot, sway, monkeypatch):
    """sway names the focused window: the same window is the same target (so a second dictation into it
    joins the first, ``LastWritten``), another window is another, and a text meant for a window that
    lost the focus is kept, as on X11."""
    from sayso.app.core.writing import LastWritten

    require("wtype", "swaymsg")
    env = _in_sways_session(sway, monkeypatch)
    first = TargetWindow("sayso-sway-first", env=env)
    second = None
    try:
        _wait_focused(sway, "sayso-sway-first")
        delivery = Delivery()
        target = delivery.capture_target()
        assert target is not None and delivery.capture_target() == target
        last = LastWritten()
        last.remember(target, "And so my fellow Americans.")
        assert last.previous(delivery.capture_target()) == "And so my fellow Americans."
        second = TargetWindow("sayso-sway-second", env=env)  # opened last, so sway focuses it
        _wait_focused(sway, "sayso-sway-second")
        assert delivery.capture_target() not in (None, target) and last.previous(delivery.capture_target()) is None
        result = _delivered(qtbot, delivery, "meant for the first window", "type", target)
        assert not result.delivered and "window changed" in result.message
        qtbot.wait(500)
        assert first.text == "" and second.text == ""
    finally:
        for window in (first, second):
            if window is not None:
                window.close()


def test_a_paste_on_sway_reaches_a_gtk3_editor(qtbot, sway, monkeypatch):
    """GTK 3 (Mousepad, gedit) finds a shortcut's key through the keymap's keys below its highest keycode,
    and wtype's keymap holds only the keys it sends: pasted with Ctrl+V alone, the ``v`` is that highest
    key, and the text view never pastes. The text arrives, and its text view saw Ctrl+V."""
    require("wtype")
    env = _in_sways_session(sway, monkeypatch)
    editor = GtkTargetWindow("sayso-gtk3-editor", env=env)  # opened last, so sway gives it the focus
    try:
        _wait_focused(sway, "sayso-gtk3-editor")
        delivery = Delivery()
        text = "Pasted into GTK 3, 4711: ünïcödé."
        result = _delivered(qtbot, delivery, text, "paste")
        assert result.delivered and result.method == "paste" and not result.confirmed, result
        assert editor.wait_for_text(lambda t: t == text, timeout=20) == text
        assert editor.keys == ["<Primary>v"]
        delivery.close()
    finally:
        editor.close()
