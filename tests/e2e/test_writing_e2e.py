"""End to end, the text a dictation writes: Sayso as its own process on Xvfb with its microphone on a
PulseAudio null sink, the cleanup through the chat server double on 127.0.0.1, a per-app profile for the
target window, and two dictations into one field that join. What arrives in the other process's text
field is what the rules and the cleanup make of the engine's words, and History keeps both."""

import os
import sqlite3
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import soundfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from e2e.app_process import AppProcess  # noqa: E402
from e2e.chat_server_double import ChatServerDouble, tidy  # noqa: E402
from e2e.fixtures import desktop  # noqa: E402, F401
from e2e.services import require  # noqa: E402
from e2e.target import TargetWindow  # noqa: E402
from sayso.app.core.profiles import Profile  # noqa: E402
from sayso.app.core.text.joining import join_to  # noqa: E402
from sayso.app.core.text.pipeline import TextRules, apply_rules  # noqa: E402
from sayso.app.core.text.vocabulary import parse_replacements  # noqa: E402
from sayso.app.platform.focus import window_class  # noqa: E402

from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402

REPLACEMENTS = "fellow americans -> fellow citizens"


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=30)


@pytest.fixture(scope="module")
def short_jfk(tmp_path_factory) -> Path:
    speech, rate = soundfile.read(AUDIO / "jfk.wav", dtype="float32")
    path = tmp_path_factory.mktemp("clips") / "fellow-americans.wav"
    soundfile.write(path, speech[: int(3.5 * rate)], rate)  # "And so, my fellow Americans"
    return path


def _rows(data: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{data / 'history.sqlite3'}?mode=ro", uri=True) as db:
        return db.execute("SELECT text, raw_text, note, status FROM dictations ORDER BY id").fetchall()


def _dictate(app: AppProcess, desktop, editor: TargetWindow, clip: Path, done: int) -> tuple:
    """Hold the shortcut over ``clip`` with ``editor`` focused; the History row of dictation ``done``."""
    editor.focus()
    time.sleep(0.3)
    xdotool("keydown", "ctrl+space")
    desktop.play(clip)
    xdotool("keyup", "ctrl+space")
    deadline = time.time() + 300
    while time.time() < deadline:
        rows = _rows(app.data)
        if len(rows) >= done and rows[done - 1][3] == "done":
            return rows[done - 1]
        time.sleep(0.1)
    raise AssertionError("\n".join(app.log[-30:]))


def test_dictations_are_written_by_the_rules_cleaned_joined_and_kept_with_what_was_heard(desktop, short_jfk,
                                                                                         tmp_path):
    require("xdotool", "paplay")
    editor = TargetWindow("sayso-e2e-writing")
    data = tmp_path / "data"
    with ChatServerDouble() as chat:
        settings = {
            "model": str(TINY_EN_GGUF), "device": "cpu", "hotkey": "ctrl+space", "mode": "hold", "cues": False,
            "delivery": "paste", "replacements": REPLACEMENTS, "cleanup": True, "cleanup_url": chat.url,
            "cleanup_model": "local", "cleanup_timeout": 3.0,
            "profiles": [asdict(Profile(window_class(editor.window), delivery="type"))],
        }  # fmt: skip
        app = AppProcess(data, settings)
        app.data = data
        try:
            app.wait_for_log(r"Sayso is ready", timeout=600)
            rules = TextRules(replacements=parse_replacements(REPLACEMENTS))

            first_text, raw, note, _ = _dictate(app, desktop, editor, short_jfk, 1)
            assert "fellow americans" in raw.lower()  # what the engine heard is kept
            assert first_text == tidy(apply_rules(raw, rules)) and "fellow citizens" in first_text and not note
            assert chat.requests[0].user_text == apply_rules(raw, rules)
            editor.wait_for_text(lambda t: t == first_text, timeout=30)
            app.wait_for_log(r"sent \d+ characters by type", timeout=30)  # the profile's delivery

            chat.status, chat.error_message = 503, "loading model"  # the server fails: the rules' text goes in
            second_text, raw, note, _ = _dictate(app, desktop, editor, short_jfk, 2)
            assert second_text == apply_rules(raw, rules) and "503" in note
            joined = first_text + join_to(first_text, second_text)  # the same field: a space, the right case
            assert joined.startswith(first_text + " ")
            assert editor.wait_for_text(lambda t: t == joined, timeout=30) == joined
        finally:
            assert app.stop() == 0, "\n".join(app.log[-30:])
            editor.close()
