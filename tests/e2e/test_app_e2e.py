"""End to end, as a user dictates: Sayso runs as its own process on an X display (Xvfb), its microphone is
a PulseAudio null sink's monitor into which the test plays real speech, xdotool holds the shortcut, and
the words must arrive in another process's window. Run with -s to see the key-up-to-text times.
"""

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.app_process import AppProcess  # noqa: E402
from e2e.fixtures import desktop, system_tray  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow  # noqa: E402

from support.data import AUDIO, TINY_EN_GGUF, needs_clips  # noqa: E402
from support.texts import JFK_WORDS, reference_words, words  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"
BECKETT = AUDIO / "beckett.wav"


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=30)


@pytest.fixture(scope="module")
def sayso(desktop, tmp_path_factory):
    require("xdotool", "xterm", "paplay")
    data = tmp_path_factory.mktemp("sayso-data")
    settings = {
        "model": str(MODEL),
        "device": "cpu",
        "hotkey": "ctrl+space",
        "mode": "hold",
        "delivery": "paste",
        "cues": False,
    }
    app = AppProcess(data, settings)
    app.wait_for_log(r"Sayso is ready", timeout=600)
    app.data = data
    yield app
    assert app.stop() == 0, "\n".join(app.log[-30:])


@pytest.fixture
def windows():
    opened = []
    yield lambda title: opened.append(TargetWindow(title)) or opened[-1]
    for window in opened:
        window.close()


def _history_rows(data: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True) as db:
        return db.execute("SELECT text, audio_path, status FROM dictations ORDER BY id").fetchall()


def dictate_jfk_into(editor, sayso, desktop) -> int:
    """Hold the shortcut over jfk.wav with ``editor`` focused until its words arrive there; the length
    of Sayso's log before the dictation (``wait_for_log``'s ``since``)."""
    editor.focus()
    time.sleep(0.3)
    logged = len(sayso.log)
    xdotool("keydown", "ctrl+space")
    desktop.play(JFK)
    xdotool("keyup", "ctrl+space")
    assert words(editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)) == JFK_WORDS
    return logged


def test_hold_to_talk_pastes_into_another_app(sayso, desktop, windows):
    editor = windows("sayso-e2e-editor")
    editor.command("clipboard what the user had copied")
    editor.focus()
    time.sleep(0.3)
    xdotool("keydown", "ctrl+space")
    desktop.play(JFK)  # 11 s of speech into the microphone, while the key is held
    key_up = time.time()
    xdotool("keyup", "ctrl+space")
    text = editor.wait_for_text(lambda t: words(t) == JFK_WORDS, timeout=300)
    latency = editor.changed_at - key_up
    print(f"\nkey-up to text (hold to talk, paste, 11 s of speech): {latency * 1000:.0f} ms")
    assert words(text) == JFK_WORDS
    sayso.wait_for_log(r"delivered \d+ characters by paste", timeout=30)
    assert editor.clipboard() == "what the user had copied"  # the clipboard was restored
    (row,) = [r for r in _history_rows(sayso.data) if words(r[0]) == JFK_WORDS]
    assert row[2] == "done" and Path(row[1]).exists()
    recorded, rate = soundfile.read(row[1])
    assert rate == 16000 and len(recorded) / rate >= 11.0  # pre-roll and tail included


def test_a_clipboard_of_several_types_comes_back_whole_after_a_paste(sayso, desktop, windows):
    """What the user had copied (here an image, its text and a type of the copying app's own) is on the
    clipboard again after the dictation was pasted, in every type."""
    editor = windows("sayso-e2e-clipboard")
    editor.command("clipboard-image a chart of the quarter")
    before = editor.clipboard_contents()
    assert before["image"] == [24, 16, "#3366cc"] and "application/x-sayso-test" in before["formats"]
    logged = dictate_jfk_into(editor, sayso, desktop)
    sayso.wait_for_log(r"delivered \d+ characters by paste", timeout=30, since=logged)
    # The editor learns of the clipboard's new owner by an X event that may trail the log line a little.
    same = ("clipboard", "image", "own")
    deadline = time.monotonic() + 5
    while [(after := editor.clipboard_contents())[k] for k in same] != [before[k] for k in same]:
        assert time.monotonic() < deadline, (after, before)
        time.sleep(0.2)
    assert set(before["formats"]) <= set(after["formats"])  # offered again, now from Sayso (X11 adds its own)


def test_five_dictations_in_a_row_are_each_pasted(sayso, desktop, windows, tmp_path):
    """After a paste Sayso holds the clipboard (the user's contents, put back): the next paste finds it
    Sayso's own and pastes again, rather than asking itself for it and waiting in vain, and each paste is
    confirmed by the editor fetching the text."""
    speech, rate = soundfile.read(JFK, dtype="float32")
    short = tmp_path / "short.wav"
    soundfile.write(short, speech[: 3 * rate], rate)  # "And so my fellow Americans"
    editor = windows("sayso-e2e-in-a-row")
    editor.command("clipboard what the user had copied")
    editor.focus()
    time.sleep(0.3)
    logged = len(sayso.log)
    for count in range(1, 6):
        since = len(sayso.log)
        xdotool("keydown", "ctrl+space")
        desktop.play(short)
        xdotool("keyup", "ctrl+space")
        sayso.wait_for_log(r"(delivered|sent) \d+ characters by", timeout=120, since=since)
        assert editor.wait_for_text(lambda t, n=count: t.lower().count("americans") == n, timeout=10)
    # pasted each time, never typed (the shortcut's Ctrl reaches the editor; its Space is grabbed)
    assert editor.keys.count("Ctrl+V") == 5 and all(key.startswith("Ctrl+") for key in editor.keys), editor.keys
    assert len([line for line in sayso.log[logged:] if re.search(r"delivered \d+ characters by paste", line)]) == 5
    assert editor.clipboard() == "what the user had copied"


HUNG_OWNER = """
import sys, time
from Xlib import X, display
server = display.Display()
window = server.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
window.set_selection_owner(server.intern_atom("CLIPBOARD"), X.CurrentTime)
server.flush()
print(window.id, flush=True)
time.sleep(600)  # holds the clipboard and never answers a request for it, as a hung app does
"""


def test_a_clipboard_whose_owner_hangs_is_left_as_it_is_and_the_text_typed(sayso, desktop, windows):
    """The app that owns the clipboard doesn't answer (hung): the paste asks it once, briefly, types the
    dictation instead, and leaves the clipboard to that app."""
    from Xlib import display

    editor = windows("sayso-e2e-hung-clipboard")
    owner = subprocess.Popen([sys.executable, "-c", HUNG_OWNER], stdout=subprocess.PIPE, text=True)
    try:
        owner_window = int(owner.stdout.readline())
        logged = dictate_jfk_into(editor, sayso, desktop)
        sayso.wait_for_log(r"clipboard's owner doesn't answer: typing instead", timeout=30, since=logged)
        sayso.wait_for_log(r"sent \d+ characters by type", timeout=30, since=logged)  # typed: not confirmed
        server = display.Display()
        try:
            assert server.get_selection_owner(server.intern_atom("CLIPBOARD")).id == owner_window
        finally:
            server.close()
    finally:
        owner.kill()
        owner.wait()


@needs_clips("beckett.wav")
def test_toggle_from_a_desktop_shortcut_types_into_a_terminal(sayso, desktop, tmp_path):
    out = tmp_path / "typed.txt"
    title = "sayso-e2e-terminal"
    terminal = subprocess.Popen(["xterm", "-T", title, "-e", f"stty -icanon -echo; cat > {out}"])
    try:
        # Visible, not only created: focusing a window that isn't mapped yet fails (BadMatch).
        search = ["xdotool", "search", "--sync", "--onlyvisible", "--name", f"^{title}$"]
        window = subprocess.run(search, capture_output=True, text=True, timeout=60).stdout.split()[0]
        xdotool("windowfocus", "--sync", window)
        time.sleep(0.5)
        assert sayso.run("--toggle").returncode == 0  # what a desktop shortcut bound to `sayso --toggle` runs
        desktop.play(BECKETT)
        toggled = time.time()
        assert sayso.run("--toggle").returncode == 0
        deadline = time.time() + 300
        while not (out.exists() and "better" in out.read_text()) and time.time() < deadline:
            time.sleep(0.05)
        print(f"\n`sayso --toggle` to text (typed into xterm, 10 s of speech): {(time.time() - toggled) * 1000:.0f} ms")
        assert words(out.read_text()) == reference_words("beckett.wav")
        sayso.wait_for_log(r"sent \d+ characters by type", timeout=30)  # a terminal gets typed text
    finally:
        terminal.kill()


def test_text_stays_in_sayso_when_the_focus_moves(sayso, desktop, windows, tmp_path):
    speech, rate = soundfile.read(JFK, dtype="float32")
    short = tmp_path / "short.wav"
    soundfile.write(short, speech[: 4 * rate], rate)  # "And so my fellow Americans" and a bit
    first, second = windows("sayso-e2e-first"), windows("sayso-e2e-second")
    first.focus()
    time.sleep(0.3)
    xdotool("keydown", "ctrl+space")
    desktop.play(short)
    second.focus()  # the user moved on before letting go
    xdotool("keyup", "ctrl+space")
    sayso.wait_for_log(r"kept in app", timeout=300)
    time.sleep(0.5)
    assert first.text == "" and second.text == ""
    last_text = words(_history_rows(sayso.data)[-1][0])
    assert last_text.startswith("and so my fellow americans")  # kept in History (and shown in the window)


def visible_windows(app: AppProcess, title: str) -> list[str]:
    """Ids of ``app``'s mapped windows whose title matches ``title`` (a regular expression)."""
    search = ["xdotool", "search", "--all", "--onlyvisible", "--pid", str(app.process.pid), "--name", title]
    found = subprocess.run(search, capture_output=True, text=True)
    return found.stdout.split()


def test_hidden_start_waits_in_the_tray_and_its_icon_opens_the_window(desktop, system_tray, tmp_path):
    """`sayso --hidden` on a desktop with a system tray (trayer): no window, Sayso's icon in the tray;
    a click on the icon opens the window."""
    settings = {"model": str(MODEL), "device": "cpu", "hotkey": "ctrl+alt+f9", "cues": False}
    app = AppProcess(tmp_path / "sayso-data", settings, "--hidden")
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        (icon,) = system_tray.icons()
        assert visible_windows(app, "^Sayso$") == []
        xdotool("mousemove", str(icon[0]), str(icon[1]), "click", "1")
        deadline = time.monotonic() + 10
        while not visible_windows(app, "^Sayso$") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(visible_windows(app, "^Sayso$")) == 1, "a click on the tray icon did not open the window"
    finally:
        assert app.stop() == 0, "\n".join(app.log[-30:])
