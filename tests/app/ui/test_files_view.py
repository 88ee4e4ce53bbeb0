"""Files: drop jfk.wav on the main window, watch it transcribe, export SRT (and the other formats)."""

import json
import os
import re

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDragEnterEvent, QDropEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from sayso.app.ui.coordinator import Coordinator  # noqa: E402

from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"
TIMESTAMP = r"(\d\d):(\d\d):(\d\d),(\d\d\d)"


@pytest.fixture
def coordinator(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path))
    (tmp_path / "settings.json").write_text(json.dumps({"model": str(MODEL), "device": "cpu", "cues": False}))
    c = Coordinator(tmp_path)
    qtbot.addWidget(c.window)
    c.start(hotkeys=False, microphone=False)
    c.window.show()
    yield c
    c.shutdown()


def _drop(window, paths) -> None:
    """What the window receives when files are dragged from a file manager and dropped on it."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    point = QPoint(window.width() // 2, window.height() // 2)
    actions = Qt.DropAction.CopyAction
    enter = QDragEnterEvent(point, actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(point), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, drop)
    assert drop.isAccepted()


def _seconds(match) -> float:
    h, m, s, ms = map(int, match)
    return 3600 * h + 60 * m + s + ms / 1000


def test_drop_then_export_srt(coordinator, qtbot, tmp_path):
    page = coordinator.files_page
    _drop(coordinator.window, [JFK])
    assert coordinator.window.current_page() == "files"
    (job,) = [page.queue.item(i).data(Qt.ItemDataRole.UserRole) for i in range(page.queue.count())]
    finished = []
    page.job(job).handle.finished.connect(finished.append)
    row = page.queue.itemWidget(page.queue.item(0))
    assert row.name.full_text() == "jfk.wav" and "0:11" in row.status.text()
    qtbot.waitUntil(lambda: bool(finished), timeout=120_000)
    assert page.job(job).status == "done" and row.status.text().startswith("Done")
    assert all(b.isEnabled() for b in page.export_buttons.values())
    assert "fellow Americans" in page.view.toPlainText()
    assert re.search(r"^0:00\.\d →", page.view.toPlainText(), re.M)  # timestamps beside the text (speech starts at 0.3 s)

    srt = page.export(job, "srt", tmp_path / "jfk.srt").read_text(encoding="utf-8")
    cues = [c.splitlines() for c in srt.strip().split("\n\n")]
    assert [c[0] for c in cues] == [str(i) for i in range(1, len(cues) + 1)]
    times = [re.fullmatch(f"{TIMESTAMP} --> {TIMESTAMP}", c[1]).groups() for c in cues]
    starts, ends = [_seconds(t[:4]) for t in times], [_seconds(t[4:]) for t in times]
    assert starts == sorted(starts) and all(s < e for s, e in zip(starts, ends)) and ends[-1] <= 11.5
    text = " ".join(" ".join(c[2:]) for c in cues).lower()
    assert "ask not what your country can do for you" in re.sub(r"[^a-z ]", "", text)

    for fmt in ("txt", "vtt", "json"):
        out = page.export(job, fmt, tmp_path / f"jfk.{fmt}").read_text(encoding="utf-8")
        assert "country" in out
    assert json.loads((tmp_path / "jfk.json").read_text())


def test_cancel_and_remove_from_the_queue(coordinator, qtbot, tmp_path):
    page = coordinator.files_page
    first, second = page.add_files([JFK, JFK])
    page.cancel_or_remove(second)  # queued behind the first: dropped at once
    assert page.job(second).status == "cancelled"
    page.cancel_or_remove(second)  # now the button removes it
    assert page.queue.count() == 1
    qtbot.waitUntil(lambda: page.job(first).status == "done", timeout=120_000)


def test_a_folder_adds_its_media_and_a_bad_file_fails(coordinator, qtbot, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "readme.txt").write_text("not media")
    bad = folder / "broken.mp3"
    bad.write_bytes(b"\0" * 1000)
    (job,) = coordinator.files_page.add_files([folder])
    qtbot.waitUntil(lambda: coordinator.files_page.job(job).status == "failed", timeout=60_000)
    assert "broken.mp3" in coordinator.files_page.job(job).error
