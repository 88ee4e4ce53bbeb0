"""History: the recording and its row exist before transcription; search, finish, fail, delete."""

import sqlite3

import numpy as np
import soundfile

from sayso.app.core.history import History

from support.data import AUDIO


def _speech() -> np.ndarray:
    pcm, rate = soundfile.read(AUDIO / "jfk.wav", dtype="float32")
    assert rate == 16000
    return pcm


def test_add_writes_the_audio_and_a_pending_row(tmp_path):
    history = History(tmp_path)
    pcm = _speech()
    entry = history.add(pcm, "whisper-tiny.en")
    assert entry.status == "transcribing" and entry.text == ""
    assert entry.audio_path.parent == tmp_path / "recordings"
    saved, rate = soundfile.read(entry.audio_path, dtype="float32")
    assert rate == 16000 and len(saved) == len(pcm)
    assert np.max(np.abs(saved - pcm)) < 1e-4  # 16-bit wav of the same samples
    assert abs(entry.duration - 11.0) < 0.01
    history.close()


def test_database_is_in_wal_mode(tmp_path):
    History(tmp_path).close()
    mode = sqlite3.connect(tmp_path / "history.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_finish_search_and_delete(tmp_path):
    history = History(tmp_path)
    first = history.add(_speech()[:16000], "tiny")
    second = history.add(_speech()[:32000], "tiny")
    history.finish(first.id, "Ask not what your country can do for you", "whisper-tiny.en")
    history.finish(second.id, "100% of the_budget", "whisper-base")
    assert [e.id for e in history.search()] == [second.id, first.id]  # newest first
    assert [e.id for e in history.search("COUNTRY")] == [first.id]  # case-insensitive
    assert [e.id for e in history.search("100%")] == [second.id]  # LIKE wildcards are literal
    assert [e.id for e in history.search("the_b")] == [second.id]
    assert history.search("0%_") == []
    assert history.get(second.id).model == "whisper-base"
    history.delete(first.id)
    assert history.get(first.id) is None and not first.audio_path.exists()
    history.close()


def test_unfinished_rows_are_marked_failed_on_the_next_start(tmp_path):
    history = History(tmp_path)
    entry = history.add(_speech()[:8000], "tiny")
    history.close()  # as if the app died while transcribing
    reopened = History(tmp_path)
    again = reopened.get(entry.id)
    assert again.status == "failed" and "again" in again.error and again.audio_path.exists()
    reopened.retry(entry.id)
    assert reopened.get(entry.id).status == "transcribing"
    reopened.fail(entry.id, "No model.")
    assert reopened.get(entry.id).error == "No model."
    reopened.close()


def test_the_engine_words_are_kept_beside_the_written_text_and_searched(tmp_path):
    history = History(tmp_path)
    entry = history.add(np.zeros(16000, np.float32))
    history.finish(entry.id, "Hello, world.\nNew line.", "tiny", raw_text="Hello comma world period new line",
                   note="Written without the cleanup: the server did not answer in 5 s.")
    done = history.get(entry.id)
    assert (done.text, done.raw_text) == ("Hello, world.\nNew line.", "Hello comma world period new line")
    assert done.note.startswith("Written without the cleanup")
    assert [e.id for e in history.search("comma world")] == [entry.id]  # found by what was said, too
    same = history.add(np.zeros(16000, np.float32))
    history.finish(same.id, "Plain.", "tiny", raw_text="Plain.")
    assert history.get(same.id).raw_text == ""  # kept only where the rules changed something
    history.close()


def test_a_database_from_before_the_written_text_gets_its_new_columns(tmp_path):
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:  # the first release's table
        db.execute("CREATE TABLE dictations (id INTEGER PRIMARY KEY, created REAL NOT NULL, audio_path TEXT NOT NULL, "
                   "duration REAL NOT NULL, model TEXT NOT NULL DEFAULT '', text TEXT NOT NULL DEFAULT '', "
                   "status TEXT NOT NULL DEFAULT 'transcribing', error TEXT NOT NULL DEFAULT '')")
        db.execute("INSERT INTO dictations (created, audio_path, duration, text, status) "
                   "VALUES (1, 'a.wav', 1.0, 'old', 'done')")
    history = History(tmp_path)
    (old,) = history.search()
    assert (old.text, old.raw_text, old.note) == ("old", "", "")
    history.close()

