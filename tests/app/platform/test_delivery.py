"""Delivery into another process's window on a real X display (Xvfb), through real xdotool."""

import os
import secrets
import subprocess
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from Xlib import display  # noqa: E402

from sayso.app.platform.delivery import Delivery  # noqa: E402
from sayso.app.platform.focus import focused_window, window_class  # noqa: E402
from sayso.app.platform.keymap import keysym  # noqa: E402
from e2e.fixtures import x_display  # noqa: E402, F401
from e2e.command_lines import CommandLineWatch  # noqa: E402
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow  # noqa: E402


@pytest.fixture
def targets(x_display):
    windows = []
    yield lambda title: windows.append(TargetWindow(title)) or windows[-1]
    for window in windows:
        window.close()


def keyboard_map() -> list[tuple[int, ...]]:
    """The X server's keysyms for every keycode, as any client reads them."""
    server = display.Display()
    try:
        first = server.display.info.min_keycode
        return [tuple(row) for row in server.get_keyboard_mapping(first, server.display.info.max_keycode - first + 1)]
    finally:
        server.close()


def test_typed_text_arrives_exactly(qtbot, targets):
    editor = targets("delivery-editor")
    editor.focus()
    delivery = Delivery()
    target = delivery.capture_target()
    assert target == editor.window == focused_window()
    text = "Ask not what your country can do for you — déjà vu, 100%!"
    before = keyboard_map()
    with qtbot.waitSignal(delivery.done, timeout=20_000) as done:
        delivery.deliver(text, target, "type")
    assert done.args[0].delivered and done.args[0].method == "type"
    assert editor.wait_for_text(lambda t: t == text, timeout=10) == text
    # "—", "é" and "à" were bound to spare keycodes for the typing, and are given back after it
    bound = {row[0] for row in keyboard_map()} - {row[0] for row in before}
    assert {keysym(char) for char in "—éà"} <= bound
    qtbot.waitUntil(lambda: keyboard_map() == before, timeout=10_000)


def test_typing_keeps_characters_while_the_target_is_busy(qtbot, targets):
    """The target lags behind the keystrokes (every core busy): no character the keyboard lacks is lost."""
    editor = targets("delivery-busy")
    editor.focus()
    delivery = Delivery()
    text = "Ça coûte 5 € — naïve café, señor; Ωμέγα, déjà vu"
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        with qtbot.waitSignal(delivery.done, timeout=20_000) as done:
            delivery.deliver(text, editor.window, "type")
        assert done.args[0].delivered
        assert editor.wait_for_text(lambda t: t == text, timeout=20) == text
    finally:
        for burner in burners:
            burner.kill()


def test_typed_text_never_appears_on_a_command_line(qtbot, targets):
    # A code of this run's own: another test run on the machine types its own secret meanwhile.
    secret = f"my PIN is 4711 and the door code {secrets.randbelow(10**8):08d}"
    with CommandLineWatch(secret) as watch:  # first, that the watch sees a command line holding it
        subprocess.run(["sh", "-c", "sleep 0.5", "sh", secret], check=True)
    assert watch.found
    editor = targets("delivery-private")
    editor.focus()
    delivery = Delivery()
    with CommandLineWatch(secret) as watch:
        for i in range(1, 4):
            with qtbot.waitSignal(delivery.done, timeout=20_000) as done:
                delivery.deliver(secret, delivery.capture_target(), "type")
            assert done.args[0].delivered
            assert editor.wait_for_text(lambda t, n=i: t == secret * n, timeout=10) == secret * i
    assert watch.rounds > 10 and watch.found == []


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
