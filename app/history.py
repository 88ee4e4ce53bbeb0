"""Every dictation, kept in SQLite (WAL mode) with its audio in ``recordings/`` next to the database.

The audio and the row are written *before* transcription starts, so a crash, a failed model or a
closed laptop never loses what the user said: such rows are marked failed on the next start and can
be transcribed again from the History page.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.audio import SAMPLE_RATE, save_wav

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
_COLUMNS = "id, created, audio_path, duration, model, text, status, error"
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


class History:
    """The dictation log at ``folder/history.sqlite3``; recordings go to ``folder/recordings/``."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.recordings = self.folder / "recordings"
        self.recordings.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.folder / "history.sqlite3")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        with self._db:
            self._db.execute(
                "UPDATE dictations SET status='failed', error=? WHERE status='transcribing'", (_INTERRUPTED,)
            )

    def add(self, pcm16k: np.ndarray, model: str = "") -> Entry:
        """Save the recording as a wav file, then its row (status 'transcribing'); returns the row."""
        now = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
        path = self.recordings / f"{stamp}.wav"
        suffix = 1
        while path.exists():  # two takes in one millisecond (a test, a script): never overwrite one
            path, suffix = self.recordings / f"{stamp}-{suffix}.wav", suffix + 1
        save_wav(path, pcm16k)
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

    def finish(self, entry_id: int, text: str, model: str) -> None:
        with self._db:
            self._db.execute(
                "UPDATE dictations SET text=?, model=?, status='done', error='' WHERE id=?", (text, model, entry_id)
            )

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
        """Entries whose text contains ``query`` (case-insensitive), newest first."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM dictations WHERE text LIKE ? ESCAPE '\\' ORDER BY created DESC, id DESC LIMIT ?",
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


def _entry(row) -> Entry:
    id_, created, audio, duration, model, text, status, error = row
    return Entry(id_, created, Path(audio), duration, model, text, status, error)
