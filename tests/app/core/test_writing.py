"""From the engine's words to the written text in the app (app/core/writing.py): the user's rules, the
cleanup by a language model (against the chat server double on 127.0.0.1) off the GUI thread and in
order, the text as the rules made it when the cleanup fails, and joining a dictation to the last one."""

from __future__ import annotations

import threading

from e2e.chat_server_double import chat_server, tidy  # noqa: F401 - a fixture
from sayso.app.core.settings import Settings
from sayso.app.core.text.pipeline import apply_rules
from sayso.app.core.writer import TextWriter
from sayso.app.core.writing import JOIN_SECONDS, LastWritten, cleanup_for, text_rules

HEARD = "Um, the meeting is on Tuesday period new line bring the slides"


def _write_all(qtbot, writer: TextWriter, items, rules, cleanup) -> list:
    got = []
    writer.written.connect(got.append)
    for key, raw in items:
        writer.write(key, raw, rules, cleanup)
    qtbot.waitUntil(lambda: len(got) == len(items), timeout=20_000)
    writer.written.disconnect(got.append)
    return got


def test_the_rules_then_the_cleanup_run_off_the_gui_thread_in_order(qtbot, chat_server):
    settings = Settings(cleanup=True, cleanup_url=chat_server.url, cleanup_model="qwen3:4b")
    rules, cleanup = text_rules(settings), cleanup_for(settings)
    seen_on = []
    chat_server.reply = lambda text: seen_on.append(threading.current_thread().name) or tidy(text)
    chat_server.delay = 0.3  # the first waits: the second, quicker to clean, must not overtake it
    writer = TextWriter()
    got = _write_all(qtbot, writer, [(1, HEARD), (2, "um second one")], rules, cleanup)
    assert [w.key for w in got] == [1, 2]
    first = got[0]
    assert first.raw == HEARD
    assert chat_server.requests[0].user_text == apply_rules(HEARD, rules)  # the model sees the rules' text
    assert first.text == tidy(apply_rules(HEARD, rules)) and first.note == ""
    writer.stop()


def test_a_failed_or_slow_cleanup_writes_the_rules_text_and_says_why(qtbot, chat_server):
    settings = Settings(cleanup=True, cleanup_url=chat_server.url, cleanup_timeout=0.5)
    writer = TextWriter()
    chat_server.status, chat_server.error_message = 500, "model not loaded"
    (failed,) = _write_all(qtbot, writer, [("a", HEARD)], text_rules(settings), cleanup_for(settings))
    assert failed.text == apply_rules(HEARD, text_rules(settings))
    assert "500" in failed.note and "model not loaded" in failed.note
    chat_server.status, chat_server.delay = 200, 2.0
    (slow,) = _write_all(qtbot, writer, [("b", HEARD)], text_rules(settings), cleanup_for(settings))
    assert slow.text == failed.text and "0.5 s" in slow.note
    writer.stop()


def test_without_cleanup_nothing_is_sent_and_the_rules_follow_the_settings(qtbot, chat_server):
    writer = TextWriter()
    plain = Settings(spoken_commands=False, remove_fillers=True, replacements="slides -> deck")
    assert cleanup_for(plain) is None
    (written,) = _write_all(qtbot, writer, [(0, HEARD)], text_rules(plain), cleanup_for(plain))
    assert "period new line" in written.text and "deck" in written.text and not written.text.startswith("Um")
    assert chat_server.requests == []
    writer.stop()


def test_a_new_dictation_joins_the_last_text_only_in_the_same_window_and_soon():
    now = [100.0]
    last = LastWritten(clock=lambda: now[0])
    assert last.previous("42") is None  # nothing written yet: a new place
    last.remember("42", "First sentence.")
    assert last.previous("42") == "First sentence."
    assert last.previous("43") is None and last.previous(None) is None
    now[0] += JOIN_SECONDS
    assert last.previous("42") is None  # long after: taken as a new start
    last.remember(None, "Somewhere unknown.")  # Wayland: no window id, so nothing to join
    assert last.previous(None) is None
