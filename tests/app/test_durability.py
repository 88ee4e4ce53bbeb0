"""A dictation survives the app being killed while it is transcribed, and the next start finishes it;
a disk that fills up costs a dictation nothing but its place in History.

Sayso runs as its own process (``python -m app``) on Xvfb, its microphone a PulseAudio null sink into
which the test plays real speech; ``sayso --toggle`` starts and stops the dictation. The moment the
dictation's row appears as being transcribed, the process gets SIGKILL: no handler runs, nothing is
flushed by the app on its way out. What was on disk at that moment must hold the whole recording and its
row (SQLite in WAL mode), private to the user. Then the app starts again on the same data folder (the
coordinator, as ``python -m app`` builds it, offscreen): the History page offers the interrupted dictation
and one click transcribes it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import time
from pathlib import Path

import pytest
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402

from sayso.app.ui.coordinator import Coordinator  # noqa: E402
from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402
from support.texts import JFK_WORDS, words  # noqa: E402
from e2e.app_process import AppProcess  # noqa: E402
from e2e.fixtures import desktop  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow  # noqa: E402



def rows(data: Path) -> list[tuple]:
    """(id, status, audio_path, duration, text, error) of every dictation, read as another process would."""
    with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True, timeout=5) as db:
        return db.execute("SELECT id, status, audio_path, duration, text, error FROM dictations ORDER BY id").fetchall()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_killed_app_loses_no_dictation_and_the_next_start_finishes_it(desktop, tmp_path, qtbot):
    require("paplay")
    data = tmp_path / "sayso"
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "toggle", "cues": False,
                "overlay": False, "live_preview": False}  # fmt: skip
    app = AppProcess(data, settings)
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        assert app.run("--toggle").returncode == 0
        desktop.play(AUDIO / "jfk.wav")  # 11 s of speech into the microphone
        assert app.run("--toggle").returncode == 0
        deadline = time.monotonic() + 60
        # The row is polled without a pause on one connection: a dictation streamed as it was spoken
        # is done a few milliseconds after its row is written, and a poll every 5 ms, each on a new
        # connection, now and then saw the row only once it was done.
        with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True, timeout=5) as db:
            while not db.execute("SELECT 1 FROM dictations").fetchone():
                assert time.monotonic() < deadline, "no dictation was saved\n" + "\n".join(app.log[-20:])
        os.kill(app.process.pid, signal.SIGKILL)  # the row is there: transcription has begun
        assert app.process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if app.process.poll() is None:
            app.process.kill()

    ((entry_id, status, audio_path, duration, _, _),) = rows(data)
    assert status == "transcribing", "the app finished before it was killed: nothing was interrupted"
    recorded, rate = soundfile.read(audio_path)
    print(f"\nkilled while transcribing: {len(recorded) / rate:.1f} s recorded, row {entry_id} on disk")
    assert rate == 16000 and len(recorded) / rate == pytest.approx(duration) and duration >= 11.0
    with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for path in [data, *data.rglob("*")]:  # what the app wrote is the user's alone (not the test's settings.json)
        if path.name != "settings.json":
            assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    assert Path(audio_path).parent == data / "recordings"

    restarted = Coordinator(data)
    qtbot.addWidget(restarted.window)
    try:
        with qtbot.waitSignal(restarted.client.loaded, timeout=120_000):
            restarted.start(hotkeys=False, microphone=False)
        page = restarted.history_page
        assert not page.interrupted.isHidden()
        assert page.interrupted.text.text().startswith("1 dictation was interrupted when Sayso stopped")
        with qtbot.waitSignal(page.entry_changed, timeout=120_000):  # transcribed, then written
            qtbot.mouseClick(page.finish_button, Qt.MouseButton.LeftButton)
        ((_, status, _, _, text, error),) = rows(data)
        print(f"transcribed on the next start: {text}")
        assert status == "done" and error == "" and words(text) == JFK_WORDS
        assert page.interrupted.isHidden()
    finally:
        restarted.shutdown()


def test_a_disk_that_refuses_the_recording_costs_the_dictation_only_its_place_in_history(desktop, tmp_path):
    """The recordings folder can no longer be written while Sayso runs (a disk remounted read-only after
    an error; here a link to /sys, which refuses even root): the user is told why and what to do in one
    line, and the words still arrive where the cursor is."""
    require("paplay", "xdotool", "xterm")
    data = tmp_path / "sayso"
    settings = {"model": str(TINY_EN_GGUF), "device": "cpu", "mode": "toggle", "cues": False, "overlay": False,
                "live_preview": False, "delivery": "paste"}  # fmt: skip
    app = AppProcess(data, settings)
    editor = TargetWindow("sayso-read-only-editor")
    try:
        app.wait_for_log(r"Sayso is ready", timeout=600)
        (data / "recordings").rmdir()
        (data / "recordings").symlink_to("/sys")
        editor.focus()
        assert app.run("--toggle").returncode == 0
        desktop.play(AUDIO / "jfk.wav")
        assert app.run("--toggle").returncode == 0
        told = app.wait_for_log(r"history: can't save the recording: (.*)", timeout=60).group(1)
        text = editor.wait_for_text(lambda t: "country" in t.lower(), timeout=300)
    finally:
        editor.close()
        assert app.stop() == 0, "\n".join(app.log[-30:])
    print(f"\ntold: {told}")
    assert "SAYSO_DATA_DIR" in told and str(data / "recordings") in told
    assert words(text) == JFK_WORDS
    assert rows(data) == []
