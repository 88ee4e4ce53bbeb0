"""Every dictation, kept in SQLite (WAL mode) with its audio in ``recordings/`` next to the database.

The audio and the row are written *before* transcription starts, and flushed to the disk, so a crash, a
killed process, a failed model or a power cut never loses what the user said: such rows are marked as
interrupted on the next start (``interrupted``) and the History page offers to transcribe them.

What people say is private: the folder and the recordings folder are the user's alone (0700), and so
are the database and every recording (0600), whatever the process's umask.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sayso.engine import SAMPLE_RATE, save_wav

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dictations (
    id INTEGER PRIMARY KEY,
    created REAL NOT NULL,                         -- seconds since the epoch
    audio_path TEXT NOT NULL,
    duration REAL NOT NULL,                        -- seconds of audio
    model TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'transcribing',   -- transcribing | done | failed
    error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS dictations_created ON dictations(created);
"""
# Columns added since the first release: a database an older version made gets them when opened.
_ADDED_COLUMNS = {
    "raw_text": "TEXT NOT NULL DEFAULT ''",  # the engine's words, before commands, vocabulary and cleanup
    "note": "TEXT NOT NULL DEFAULT ''",  # what happened to a done dictation's text (a cleanup that failed)
}
_COLUMNS = "id, created, audio_path, duration, model, text, status, error, raw_text, note"
_INTERRUPTED = "Sayso stopped before this was transcribed. Transcribe it again from here."


@dataclass(frozen=True)
class Entry:
    id: int
    created: float
    audio_path: Path
    duration: float
    model: str
    text: str
    status: str
    error: str
    raw_text: str = ""  # the engine's words where they differ from ``text`` (commands, vocabulary, cleanup)
    note: str = ""


class History:
    """The dictation log at ``folder/history.sqlite3``; recordings go to ``folder/recordings/``."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.recordings = self.folder / "recordings"
        for path in (self.folder, self.recordings):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.chmod(0o700)  # also when an older version or another tool made it readable by others
        database = self.folder / "history.sqlite3"
        database.touch(mode=0o600)  # before SQLite creates it: its -wal and -shm files take the same mode
        database.chmod(0o600)
        self._db = sqlite3.connect(database)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed row is on the disk, not only in a buffer
        self._db.executescript(_SCHEMA)
        present = {row[1] for row in self._db.execute("PRAGMA table_info(dictations)")}
        with self._db:
            for column, declaration in _ADDED_COLUMNS.items():
                if column not in present:
                    self._db.execute(f"ALTER TABLE dictations ADD COLUMN {column} {declaration}")
        with self._db:
            self._db.execute(
                "UPDATE dictations SET status='failed', error=? WHERE status='transcribing'", (_INTERRUPTED,)
            )

    def add(self, pcm16k: np.ndarray, model: str = "") -> Entry:
        """Save the recording as a wav file, then its row (status 'transcribing'); returns the row."""
        now = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
        path = self._new_recording(stamp)
        try:
            save_wav(path, pcm16k)
            _flush(path)  # on the disk before the row that points to it
        except Exception:
            path.unlink(missing_ok=True)
            raise
        try:
            with self._db:
                cursor = self._db.execute(
                    "INSERT INTO dictations (created, audio_path, duration, model) VALUES (?, ?, ?, ?)",
                    (now, str(path), len(pcm16k) / SAMPLE_RATE, model),
                )
        except sqlite3.Error:
            path.unlink(missing_ok=True)
            raise
        return self.get(cursor.lastrowid)

    def _new_recording(self, stamp: str) -> Path:
        """A new, empty, private wav file named after ``stamp``; a suffix when two takes share a
        millisecond (a test, a script): a recording is never overwritten."""
        for suffix in itertools.count():
            path = self.recordings / (f"{stamp}-{suffix}.wav" if suffix else f"{stamp}.wav")
            try:
                path.touch(mode=0o600, exist_ok=False)
            except FileExistsError:
                continue
            return path

    def interrupted(self) -> list[Entry]:
        """Dictations that Sayso stopped before transcribing (it quit, crashed or was killed), oldest
        first: their recordings are kept, so they can be transcribed now."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM dictations WHERE status='failed' AND error=? ORDER BY created, id",
            (_INTERRUPTED,),
        )
        return [_entry(row) for row in rows]

    def finish(self, entry_id: int, text: str, model: str, raw_text: str = "", note: str = "") -> None:
        """The dictation's written ``text``; ``raw_text``, the engine's words, is kept where it differs."""
        with self._db:
            self._db.execute(
                "UPDATE dictations SET text=?, model=?, status='done', error='', raw_text=?, note=? WHERE id=?",
                (text, model, raw_text if raw_text != text else "", note, entry_id),
            )

    def note(self, entry_id: int, note: str) -> None:
        """Add ``note`` (what happened to the text, such as a delivery nobody could confirm) to the entry's."""
        with self._db:
            self._db.execute("UPDATE dictations SET note=CASE WHEN note='' THEN ? ELSE note || ' ' || ? END WHERE id=?",
                             (note, note, entry_id))

    def fail(self, entry_id: int, message: str) -> None:
        with self._db:
            self._db.execute("UPDATE dictations SET status='failed', error=? WHERE id=?", (message, entry_id))

    def retry(self, entry_id: int) -> None:
        """Mark an entry as being transcribed again (keeps its old text until the new one arrives)."""
        with self._db:
            self._db.execute("UPDATE dictations SET status='transcribing', error='' WHERE id=?", (entry_id,))

    def get(self, entry_id: int) -> Entry | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM dictations WHERE id=?", (entry_id,)).fetchone()
        return _entry(row) if row else None

    def search(self, query: str = "", limit: int = 500) -> list[Entry]:
        """Entries whose text, written or as the engine heard it, contains ``query`` (case-insensitive),
        newest first."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM dictations WHERE text LIKE ?1 ESCAPE '\\' OR raw_text LIKE ?1 ESCAPE '\\' "
            "ORDER BY created DESC, id DESC LIMIT ?2",
            (pattern, limit),
        )
        return [_entry(row) for row in rows]

    def delete(self, entry_id: int) -> None:
        """Remove the row and its recording."""
        entry = self.get(entry_id)
        if entry is None:
            return
        with self._db:
            self._db.execute("DELETE FROM dictations WHERE id=?", (entry_id,))
        entry.audio_path.unlink(missing_ok=True)

    def close(self) -> None:
        self._db.close()


def _flush(path: Path) -> None:
    """Write ``path`` and its folder's entry for it to the disk (``fsync``): a power cut keeps them."""
    for target in (path, path.parent):
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _entry(row) -> Entry:
    id_, created, audio, duration, model, text, status, error, raw_text, note = row
    return Entry(id_, created, Path(audio), duration, model, text, status, error, raw_text, note)
