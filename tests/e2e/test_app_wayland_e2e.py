"""Sayso started natively on a Wayland compositor (a headless sway), as a user of a Wayland desktop
without the shortcuts portal meets it: one window, the shortcut hint in it, and a dictation started and
stopped with ``sayso --toggle`` (the binding the hint asks for) that is pasted into the Wayland app that
has the focus; and, where sway's IPC is at hand (SWAYSOCK), the shortcut held down and let go through
bindings Sayso adds to sway. The overlay is a layer surface (``app.platform.layer_shell``): it shows
above the windows in sway's output and is no window in sway's tree, so it is never tiled and never
takes the focus."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.app_process import REPO, AppProcess  # noqa: E402
from e2e.fixtures import pulse, session_bus, sway  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow, copied_in_a_wayland_app  # noqa: E402
from sayso.app.ui.overlay import BOTTOM_MARGIN, WIDTH  # noqa: E402
from sayso.app.ui.style import COLORS  # noqa: E402

from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402
from support.texts import JFK_WORDS, words  # noqa: E402


def overlay_pixels(screenshot: np.ndarray) -> tuple[float, int]:
    """In the overlay's place on the output (bottom centre, ``BOTTOM_MARGIN`` above the edge): the share
    of the pill's dark colour in the strip along its lower edge, and the count of the red dot's pixels."""
    height, width = screenshot.shape[:2]
    bottom, centre = height - BOTTOM_MARGIN, width // 2
    place = screenshot[bottom - 80 : bottom, centre - WIDTH // 2 : centre + WIDTH // 2].astype(int)
    dark = np.array([int(COLORS["overlay"][i : i + 2], 16) for i in (1, 3, 5)])
    strip = place[-20:-4, 24:-24]  # inside the rounded corners, below the text
    dark_share = float(np.mean(np.all(np.abs(strip - dark) < 24, axis=-1)))
    r, g, b = place[..., 0], place[..., 1], place[..., 2]
    return dark_share, int(np.sum((r > 110) & (r > 2 * g) & (r > 2 * b)))


def test_a_toggled_dictation_on_sway_shows_the_overlay_on_a_layer_surface_not_in_a_window(sway, pulse, tmp_path):
    """While recording, the overlay's pixels (its dark pill, its red dot) are at the bottom centre of
    sway's output, where before there were none, yet sway's tree holds no window beside the main one
    and the editor keeps the focus; the text is pasted into it, and once the "Inserted" message has
    hidden, the overlay is gone. The screenshots stay in the test's folder."""
    require("wl-copy", "wtype")
    data = tmp_path / "sayso"
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "toggle", "cues": False}
    app = AppProcess(data, settings, env=env)
    editor = None
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        ours = lambda: [w for w in sway.windows() if w["pid"] == app.process.pid]  # noqa: E731
        (window,) = ours()
        assert window["app_id"] == "io.github.sayso.Sayso" and window["name"] == "Sayso"  # the desktop entry's id
        editor = TargetWindow("sayso-wayland-editor", env=env)  # opened last, so it has the focus
        focused = lambda: [w["name"] for w in sway.windows() if w["focused"]]  # noqa: E731
        deadline = time.monotonic() + 30
        while focused() != ["sayso-wayland-editor"]:
            assert time.monotonic() < deadline, sway.windows()
            time.sleep(0.1)
        before = overlay_pixels(sway.screenshot(tmp_path / "before.png"))
        assert before[0] < 0.05 and before[1] == 0, before

        toggle = [sys.executable, "-m", "sayso", "--toggle"]
        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        app.wait_for_log(r"recording \(target window", timeout=30)
        pulse.play(AUDIO / "jfk.wav")
        recording = overlay_pixels(sway.screenshot(tmp_path / "recording.png"))
        assert recording[0] > 0.5 and recording[1] >= 20, recording
        assert [w["name"] for w in ours()] == ["Sayso"]  # no overlay window, no hint window beside the main one
        assert focused() == ["sayso-wayland-editor"]

        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        text = editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)
        assert words(text) == JFK_WORDS
        app.wait_for_log(r"sent \d+ characters by paste", timeout=30)
        deadline = time.monotonic() + 10  # "Inserted" shows for 0.9 s
        while (after := overlay_pixels(sway.screenshot(tmp_path / "after.png")))[0] > 0.05:
            assert time.monotonic() < deadline, after
            time.sleep(0.2)
        assert after[1] == 0, after
        assert [w["name"] for w in ours()] == ["Sayso"] and focused() == ["sayso-wayland-editor"]
    finally:
        if editor is not None:
            editor.close()
        assert app.stop() == 0, "\n".join(app.log[-30:])  # SIGTERM: a clean quit, not a crash
    with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True) as db:
        (text,) = db.execute("SELECT text FROM dictations").fetchone()
    assert words(text) == JFK_WORDS


def test_a_dictation_on_sway_is_pasted_into_the_focused_wayland_app(sway, pulse, tmp_path):
    """The text set as the clipboard through data control, then wtype's Ctrl+V into the window sway
    focused (the newest), then the clipboard the user had is put back: each through standard input or
    the Wayland protocol, never a command line."""
    require("wl-copy", "wl-paste", "wtype")
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "toggle", "delivery": "paste", "cues": False}
    app = AppProcess(tmp_path / "sayso", settings, env=env)
    editor = None
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        editor = TargetWindow("sayso-wayland-editor", env=env)  # opened last, so it has the focus
        clipboard = {**app.env, "PATH": os.environ["PATH"]}
        subprocess.run(["wl-copy"], input=b"what the user had copied", env=clipboard, check=True, timeout=10)
        toggle = [sys.executable, "-m", "sayso", "--toggle"]
        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        app.wait_for_log(r"recording \(target window", timeout=30)
        pulse.play(AUDIO / "jfk.wav")
        key_up = time.time()
        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        text = editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)
        print(f"\nsecond toggle to text (sway, data-control + wtype paste, 11 s of speech): "
              f"{(editor.changed_at - key_up) * 1000:.0f} ms")  # fmt: skip
        assert words(text) == JFK_WORDS
        app.wait_for_log(r"sent \d+ characters by paste", timeout=30)
        deadline = time.monotonic() + 5  # the clipboard is put back as the delivery ends
        while (restored := subprocess.run(["wl-paste", "--no-newline"], env=clipboard, capture_output=True,
                                          timeout=10).stdout) != b"what the user had copied":  # fmt: skip
            assert time.monotonic() < deadline, restored
            time.sleep(0.2)
    finally:
        if editor is not None:
            editor.close()
        assert app.stop() == 0, "\n".join(app.log[-30:])


ICON_TYPES = {"cur", "ico", "x-icon", "vnd.microsoft.icon"}
"""Image subtypes whose bytes Qt writes a little differently each time it is asked (ICO and CUR)."""


def test_a_paste_on_sway_gives_back_every_type_the_user_had_copied(sway, pulse, tmp_path):
    """The user copied in an app that offers several types at once (text, an image in many formats, a type
    of its own): after the dictation is pasted the clipboard offers the same types, each byte for byte
    (Qt writes a few bytes of an ICO or CUR image differently each time it is asked: those the same
    size). Once that app and Sayso have quit, Sayso's keeper process offers them still, and leaves when
    another app copies."""
    require("wl-copy", "wl-paste", "wtype")
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "toggle", "delivery": "paste", "cues": False}
    app = AppProcess(tmp_path / "sayso", settings, env=env)
    copier = editor = keeper = None
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        clipboard = {**app.env, "PATH": os.environ["PATH"]}

        def wl_paste(*args: str) -> bytes:
            return subprocess.run(["wl-paste", *args], env=clipboard, capture_output=True, timeout=10).stdout

        copier = copied_in_a_wayland_app("sayso-wayland-copier", env)
        types = wl_paste("--list-types").decode().split()
        copied = {t: wl_paste("--no-newline", "--type", t) for t in types}
        # Those of the same bytes in four reads, ICO and CUR left out by name: their few varying bytes can
        # match four times and then differ.
        steady = [t for t in types if t.split("/")[-1] not in ICON_TYPES
                  and all(wl_paste("--no-newline", "--type", t) == copied[t] for _ in range(3))]
        assert len(types) > 3 and copied["text/plain"] == b"what the user copied", types
        editor = TargetWindow("sayso-wayland-editor", env=env)  # opened last, so it has the focus
        toggle = [sys.executable, "-m", "sayso", "--toggle"]
        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        app.wait_for_log(r"recording \(target window", timeout=30)
        pulse.play(AUDIO / "jfk.wav")
        subprocess.run(toggle, cwd=REPO, env=app.env, check=True, timeout=30)
        assert words(editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)) == JFK_WORDS
        app.wait_for_log(r"sent \d+ characters by paste", timeout=30)
        deadline = time.monotonic() + 5  # the clipboard is put back as the delivery ends
        while wl_paste("--list-types").decode().split() != types:
            assert time.monotonic() < deadline, wl_paste("--list-types")
            time.sleep(0.2)
        restored = {t: wl_paste("--no-newline", "--type", t) for t in types}
        assert {t: restored[t] for t in steady} == {t: copied[t] for t in steady}
        assert {t: len(data) for t, data in restored.items()} == {t: len(data) for t, data in copied.items()}

        for window in (editor, copier):
            window.close()
        editor = copier = None
        quitting = time.monotonic()
        assert app.stop() == 0, "\n".join(app.log[-30:])
        keeper = clipboard_keeper(app.env["SAYSO_DATA_DIR"])
        libraries = Path(f"/proc/{keeper}/maps").read_text()
        print(f"\nquit, the clipboard handed to a keeper: {(time.monotonic() - quitting) * 1000:.0f} ms; the keeper "
              f"holds {Path(f'/proc/{keeper}/status').read_text().split('VmRSS:')[1].split()[0]} kB")  # fmt: skip
        assert "libQt6" not in libraries and "numpy" not in libraries  # small, and quick to start
        assert os.getsid(keeper) == keeper  # a session of its own: the user's terminal closing leaves it be
        assert wl_paste("--list-types").decode().split() == types
        assert {t: wl_paste("--no-newline", "--type", t) for t in types} == restored
        subprocess.run(["wl-copy"], input=b"copied later", env=clipboard, check=True, timeout=10)
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{keeper}"):
            assert time.monotonic() < deadline, "the keeper stays after another app took the clipboard"
            time.sleep(0.1)
        keeper = None
        assert wl_paste("--no-newline") == b"copied later"
    finally:
        for window in (editor, copier):
            if window is not None:
                window.close()
        assert app.stop() == 0, "\n".join(app.log[-30:])
        if keeper is not None:
            os.kill(keeper, signal.SIGTERM)


def clipboard_keeper(data_dir: str) -> int:
    """The pid of the clipboard keeper that the app with this data folder left (it inherited the app's
    environment), found within a few seconds."""
    deadline = time.monotonic() + 5
    while True:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:  # gone, or another user's
                continue
            if b"--keep-clipboard" in command and f"SAYSO_DATA_DIR={data_dir}".encode() in environment:
                return int(pid)
        assert time.monotonic() < deadline, "no clipboard keeper"
        time.sleep(0.1)


def test_the_focused_wayland_app_is_named_by_sway_for_its_profile(sway, monkeypatch):
    """On sway, the app a dictation goes to (its per-app profile's name) is the focused window's app id,
    read from sway's IPC as a user's session gives it (SWAYSOCK)."""
    from sayso.app.platform.focus import focused_app, focused_window

    require("swaymsg")
    env = {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": ""}
    editor = TargetWindow("sayso-wayland-profile", env=env)  # opened last, so sway focuses it
    try:
        deadline = time.monotonic() + 30
        while not (found := [w for w in sway.windows() if w["name"] == "sayso-wayland-profile"]):
            assert time.monotonic() < deadline, sway.windows()
            time.sleep(0.1)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("SWAYSOCK", str(next(sway.folder.glob("sway-ipc.*.sock"))))
        assert focused_app(focused_window()) == found[0]["app_id"].lower() != ""
        monkeypatch.delenv("SWAYSOCK")
        assert focused_window() is None and focused_app(None) == ""  # a compositor that doesn't say: no profile
    finally:
        editor.close()


def _sway_env(sway) -> dict[str, str]:
    """The environment of an app in the user's sway session: its display and its IPC socket."""
    socket = str(next(sway.folder.glob("sway-ipc.*.sock")))
    return {"QT_QPA_PLATFORM": "wayland", "WAYLAND_DISPLAY": sway.display, "DISPLAY": "", "XDG_SESSION_TYPE": "",
            "SWAYSOCK": socket}  # fmt: skip


def test_holding_the_shortcut_on_sway_dictates_through_sways_bindings(sway, pulse, session_bus, tmp_path):
    """No portal, but sway's IPC: Sayso binds Ctrl+Space in sway, wtype's virtual keyboard holds it while
    JFK speaks, the text is pasted into the focused editor on the key-up, the editor never gets the
    chord's keys, and the bindings are gone once Sayso has quit."""
    require("wtype", "swaymsg")
    env = _sway_env(sway)
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "hold", "hotkey": "ctrl+space",
                "delivery": "paste", "cues": False}  # fmt: skip
    app = AppProcess(tmp_path / "sayso", settings, env=env)
    editor = None
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        app.wait_for_log(r"sway: shortcut bound \(Ctrl\+space\)", timeout=30)
        editor = TargetWindow("sayso-sway-hold-editor", env=env)  # opened last, so it has the focus
        # One wtype holds the chord: its virtual keyboard lives as long as the process, and sway sends a
        # keyboard's keys up when it goes. 13 s covers jfk.wav's 11 s from wherever the recording starts.
        hold = subprocess.Popen(["wtype", "-M", "ctrl", "-P", "space", "-s", "13000", "-p", "space", "-m", "ctrl"],
                                env={**app.env, "PATH": os.environ["PATH"]})  # fmt: skip
        app.wait_for_log(r"recording \(target window", timeout=30)
        pulse.play(AUDIO / "jfk.wav")
        assert hold.wait(timeout=30) == 0
        key_up = time.time()
        text = editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)
        print(f"\nkey-up to text (sway bindings, data-control + wtype paste, 11 s of speech): "
              f"{(editor.changed_at - key_up) * 1000:.0f} ms")  # fmt: skip
        assert words(text) == JFK_WORDS
        app.wait_for_log(r"sent \d+ characters by paste", timeout=30)
        assert editor.keys == ["Ctrl+V"]  # the paste's keystroke, and nothing of the chord: sway kept it
    finally:
        if editor is not None:
            editor.close()
        assert app.stop() == 0, "\n".join(app.log[-30:])
    for flags in ("--no-repeat", "--release"):  # removing a binding that isn't there is an error
        removed = subprocess.run([*sway.user, "swaymsg", "-s", env["SWAYSOCK"], "--", "unbindsym", flags,
                                  "Ctrl+space"], capture_output=True, text=True, timeout=10)  # fmt: skip
        assert removed.returncode != 0 and "Could not find binding" in removed.stdout, removed.stdout


def test_on_sway_the_shortcut_route_names_sways_bindings(sway, session_bus, monkeypatch):
    """Settings and ``sayso doctor`` say hold to talk works on sway without a portal, and hint at
    ``sayso --toggle`` where sway's IPC isn't there."""
    from sayso.app.platform.hotkeys import WAYLAND_HINT, shortcut_route

    for name, value in _sway_env(sway).items():
        monkeypatch.setenv(name, value)
    works, how = shortcut_route()
    assert works and how.startswith("sway: ") and "hold to talk works" in how
    monkeypatch.setenv("SWAYSOCK", str(sway.folder / "no-such.sock"))
    assert shortcut_route() == (False, WAYLAND_HINT)


def test_on_sway_a_chord_that_sways_config_binds_is_refused_and_left_to_the_user(sway, session_bus, monkeypatch,
                                                                                 qtbot):
    """sway would replace the config's binding without a word, and removing Sayso's later would leave
    the user without it: the listener names the binding in the way and what to do, and binds nothing."""
    from sayso.app.platform.hotkeys import HotkeyListener

    for name, value in _sway_env(sway).items():
        monkeypatch.setenv(name, value)
    listener = HotkeyListener()
    with qtbot.waitSignal(listener.failed, timeout=10_000) as failed:
        listener.start("ctrl+alt+f12")  # the fixture's config binds Ctrl+Mod1+F12
    listener.stop()
    assert failed.args[0].startswith("sway's config already binds Ctrl+Mod1+F12 (“bindsym Ctrl+Mod1+F12 nop")
    assert "choose another shortcut in Settings" in failed.args[0]
    released = subprocess.run([*sway.user, "swaymsg", "-s", os.environ["SWAYSOCK"], "--", "unbindsym", "--release",
                               "Ctrl+Mod1+F12"], capture_output=True, text=True, timeout=10)  # fmt: skip
    assert "Could not find binding" in released.stdout  # Sayso added no binding of its own


def test_on_sway_a_key_pressed_during_the_chord_leaves_the_next_press_to_end_the_dictation(sway, session_bus,
                                                                                          monkeypatch, qtbot):
    """sway drops a --release binding when another key goes down while it is held, so the chord's
    release never comes: the next press of the chord is the release."""
    from sayso.app.platform.hotkeys import HotkeyListener

    require("wtype")
    for name, value in _sway_env(sway).items():
        monkeypatch.setenv(name, value)
    wtype = lambda *keys: subprocess.run(["wtype", *keys], check=True, timeout=10)  # noqa: E731
    listener = HotkeyListener()
    with qtbot.waitSignal(listener.bound, timeout=10_000):
        listener.start("ctrl+space")
    try:
        with qtbot.waitSignal(listener.pressed, timeout=5000):
            wtype("-M", "ctrl", "-P", "space", "-k", "a", "-s", "200", "-p", "space", "-m", "ctrl")
        with qtbot.assertNotEmitted(listener.released, wait=500):
            pass
        with qtbot.waitSignal(listener.released, timeout=5000):
            wtype("-M", "ctrl", "-P", "space", "-s", "200", "-p", "space", "-m", "ctrl")
    finally:
        listener.stop()
