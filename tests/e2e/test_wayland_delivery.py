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
from e2e.target import TargetWindow  # noqa: E402
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
        deadline = time.monotonic() + 30
        while not any(w["name"] == "sayso-wayland-private" and w["focused"] for w in sway.windows()):
            assert time.monotonic() < deadline, sway.windows()
            time.sleep(0.1)
        secret = "my PIN is 4711, the door code 0815: ünïcödé too."
        delivery = Delivery()
        with CommandLineWatch(secret) as watch:
            for method, expected in (("type", secret), ("paste", secret * 2)):
                with qtbot.waitSignal(delivery.done, timeout=30_000) as done:
                    delivery.deliver(secret, delivery.capture_target(), method)
                assert done.args[0].delivered, done.args[0].message
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
        deadline = time.monotonic() + 30
        while not any(w["name"] == "sayso-wayland-wl-copy" and w["focused"] for w in sway.windows()):
            assert time.monotonic() < deadline, sway.windows()
            time.sleep(0.1)
        delivery = Delivery()
        delivery._clipboard = DataControlClipboard("sayso-no-compositor-here")
        secret = "pasted through wl-copy, 0815"
        with CommandLineWatch(secret) as watch:
            with qtbot.waitSignal(delivery.done, timeout=30_000) as done:
                delivery.deliver(secret, delivery.capture_target(), "paste")
            assert done.args[0].delivered, done.args[0].message
            assert editor.wait_for_text(lambda t: t == secret, timeout=20) == secret
        assert watch.rounds > 10 and watch.found == []
        # The restoring wl-copy starts as the delivery ends, its input written by Qt's event loop.
        qtbot.waitUntil(lambda: subprocess.run(["wl-paste", "--no-newline"], capture_output=True, timeout=10).stdout
                        == b"what the user had copied", timeout=5000)  # fmt: skip
    finally:
        editor.close()
