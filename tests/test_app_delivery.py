"""Delivery into another process's window on a real X display (Xvfb), through real xdotool."""

import os
import subprocess

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.delivery import Delivery, focused_window, window_class  # noqa: E402
from e2e.fixtures import x_display  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow  # noqa: E402


@pytest.fixture
def targets(x_display):
    windows = []
    yield lambda title: windows.append(TargetWindow(title)) or windows[-1]
    for window in windows:
        window.close()


def test_typed_text_arrives_exactly(qtbot, targets):
    editor = targets("delivery-editor")
    editor.focus()
    delivery = Delivery()
    target = delivery.capture_target()
    assert target == editor.window == focused_window()
    text = "Ask not what your country can do for you — déjà vu, 100%!"
    with qtbot.waitSignal(delivery.done, timeout=20_000) as done:
        delivery.deliver(text, target, "type")
    assert done.args[0].delivered and done.args[0].method == "type"
    assert editor.wait_for_text(lambda t: t == text, timeout=10) == text


def test_nothing_is_delivered_when_the_focus_moved(qtbot, targets):
    first, second = targets("delivery-first"), targets("delivery-second")
    first.focus()
    delivery = Delivery()
    target = delivery.capture_target()
    second.focus()  # the user switched windows while the text was being transcribed
    with qtbot.waitSignal(delivery.done, timeout=20_000) as done:
        delivery.deliver("meant for the first window", target, "type")
    result = done.args[0]
    assert not result.delivered and "window changed" in result.message
    qtbot.wait(500)
    assert first.text == "" and second.text == ""


def test_terminals_are_recognised(x_display, tmp_path):
    require("xterm", "xprop")
    title = "delivery-xterm"
    xterm = subprocess.Popen(["xterm", "-T", title, "-e", "sleep 30"])
    try:
        found = subprocess.run(
            ["xdotool", "search", "--sync", "--name", title], capture_output=True, text=True, timeout=30
        )
        assert window_class(found.stdout.split()[0]) == "xterm"
    finally:
        xterm.kill()
