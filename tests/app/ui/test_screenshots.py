"""The window's pages and the overlay as people see them, at 640 px (a tiled half of a small screen) and
1280 px wide, offscreen: each is grabbed into a PNG under ``build/screenshots`` for review, and its layout
is checked where the eye would catch a fault: every label's text fits its rectangle (font metrics
against the widget's), one-line texts that can't fit end in "…", nothing reaches past the window's
right edge, and no page scrolls sideways."""

from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QPoint, QRect, Qt  # noqa: E402
from PySide6.QtWidgets import QAbstractScrollArea, QLabel, QWidget  # noqa: E402

from support.data import AUDIO, ROOT  # noqa: E402
from sayso.app.core.engine_worker import EngineClient  # noqa: E402
from sayso.app.core.history import History  # noqa: E402
from sayso.app.core.settings import Settings  # noqa: E402
from sayso.app.platform.locations import settings_file  # noqa: E402
from sayso.app.ui import style  # noqa: E402
from sayso.app.ui.dictation_page import DictationPage  # noqa: E402
from sayso.app.ui.files_view import FilesPage  # noqa: E402
from sayso.app.ui.history_view import HistoryPage  # noqa: E402
from sayso.app.ui.main_window import MainWindow  # noqa: E402
from sayso.app.ui.overlay import Overlay  # noqa: E402
from sayso.app.ui.settings_view import SettingsPage  # noqa: E402
from sayso.app.ui.widgets import ElidedLabel  # noqa: E402

SHOTS = ROOT / "build" / "screenshots"
WIDTHS = (640, 1280)
HEIGHT = 720
SPOKEN = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
KEPT = ("Text kept in Sayso: The window changed while you were speaking, so the text was not pasted. "
        "Copy it from the Dictation page.")


def shoot(widget: QWidget, name: str):
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    assert widget.grab().save(str(path)), path
    return path


def shown_labels(widget: QWidget) -> list[QLabel]:
    return [label for label in widget.findChildren(QLabel)
            if label.isVisibleTo(widget) and label.text() and not label.text().startswith("<")]


def cut_texts(widget: QWidget) -> list[str]:
    """The labels under ``widget`` whose text doesn't fit their rectangle or reaches past its right edge."""
    cut = []
    for label in shown_labels(widget):
        metrics, room = label.fontMetrics(), label.contentsRect()
        if label.wordWrap():
            needed = metrics.boundingRect(QRect(0, 0, room.width(), 100_000), Qt.TextFlag.TextWordWrap, label.text())
            fits = needed.height() <= room.height()
        else:
            fits = metrics.horizontalAdvance(label.text()) <= room.width() and metrics.height() <= room.height()
        right = label.mapTo(widget, QPoint(label.width(), 0)).x()
        if not fits or right > widget.width():
            cut.append(label.text())
    return cut


@pytest.fixture
def window(qapp, qtbot, tmp_path, monkeypatch):
    """The main window built from its real pages, as the app styles it, with a file being transcribed
    and recent dictations (a long one, takes without speech among them)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SAYSO_DATA_DIR", raising=False)
    style.apply(qapp)
    from sayso.engine.models import data_dir

    client, settings = EngineClient(), Settings()
    pages = {"dictation": DictationPage(), "files": FilesPage(client, lambda: settings),
             "history": HistoryPage(History(tmp_path), client, lambda: settings),
             "settings": SettingsPage(settings, data_dir())}
    window = MainWindow(pages)
    qtbot.addWidget(window)
    pages["dictation"].set_state("ready", "Hold Ctrl+Space and speak.")
    pages["dictation"].show_recent([("", "Today 10:03 · 0:02"), (SPOKEN * 2, "Today 10:01 · 0:22"),
                                    ("", "Today 10:00 · 0:02"), ("", "Today 09:59 · 0:01"), ("Short one.", "Today 09:58 · 0:03")])
    meeting = shutil.copy(AUDIO / "jfk.wav", tmp_path / "quarterly_planning_meeting_notes.wav")
    job = pages["files"].add_files([meeting])[0]
    pages["files"]._on_started(job)
    pages["files"]._on_progress(job, 0.42)
    yield window
    client.shutdown()


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_window(window, qapp, width):
    window.resize(width, HEIGHT)
    window.show()
    for key, page in window.pages.items():
        window.show_page(key)
        qapp.processEvents()
        shoot(window, f"{key}-{width}")
        assert cut_texts(window) == [], (key, width)
        for area in page.findChildren(QAbstractScrollArea):
            assert not area.horizontalScrollBar().isVisible(), (key, width, type(area).__name__)


@pytest.mark.parametrize("width", WIDTHS)
def test_recent_dictations_one_line_each_in_one_size(window, qapp, width):
    """Each shows one line, shortened with "…" where it is longer, all in one font; a take without
    words shows only while it is the newest."""
    window.resize(width, HEIGHT)
    window.show()
    qapp.processEvents()
    rows = window.pages["dictation"].recent_rows()
    assert [row.text for row in rows] == ["", SPOKEN * 2, "Short one."]
    long = rows[1].body
    assert long.text().endswith("…") and long.fontMetrics().horizontalAdvance(long.text()) <= long.contentsRect().width()
    assert rows[2].body.text() == "Short one."
    assert len({row.body.font().pointSizeF() for row in rows}) == 1


def test_the_files_row_shows_whole_lines(window, qapp):
    """The name (its underscores) and the status line (its descenders) are as tall as their font."""
    window.resize(WIDTHS[0], HEIGHT)
    window.show()
    window.show_page("files")
    qapp.processEvents()
    page = window.pages["files"]
    row = page.queue.itemWidget(page.queue.item(0))
    for label in (row.name, row.status):
        assert label.contentsRect().height() >= label.fontMetrics().height(), label.text()
        assert label.mapTo(row, QPoint(0, label.height())).y() <= row.height(), label.text()
    assert row.status.text().startswith("Transcribing")
    assert "…" in row.name.text() or row.name.text() == "quarterly_planning_meeting_notes.wav"
    assert page.result_title.full_text() == "quarterly_planning_meeting_notes.wav"


def test_models_are_named_and_their_buttons_explained(window, qapp):
    window.show()
    window.show_page("models")
    qapp.processEvents()
    page = window.pages["models"]
    names = {key: row.name.text() for key, row in page.rows.items()}
    assert names["whisper-tiny"] == "Whisper tiny" and names["parakeet-v3"] == "Parakeet v3"
    assert "quick on a CPU" in page.rows["moonshine-tiny"].detail.text()
    assert "needs a GPU" in page.rows["whisper-large-v3"].detail.text()
    notes = " ".join(label.text() for label in shown_labels(page))
    assert "Convert makes it on this computer" in notes and "quick on a CPU" in notes


def test_settings_say_where_the_settings_are(window, qapp):
    from sayso.engine.models import data_dir

    window.show()
    window.show_page("settings")
    qapp.processEvents()
    paths = [label.full_text() for label in window.pages["settings"].findChildren(ElidedLabel)]
    where = settings_file(data_dir())
    assert where.parent.parent.name == "config" and str(where) in paths


def test_the_overlay_shows_a_long_message_whole(qtbot):
    overlay = Overlay()
    qtbot.addWidget(overlay)
    overlay.show_message(KEPT, "warn", timeout_ms=60_000)
    shoot(overlay, "overlay-message")
    assert cut_texts(overlay) == []
    label = overlay.state
    assert label.height() >= label.heightForWidth(label.width())
    inside = overlay.rect().adjusted(12, 8, -12, -8)  # the pill's rounded ends
    assert inside.contains(QRect(label.mapTo(overlay, QPoint(0, 0)), label.size()))
    margin_left = overlay.icon.mapTo(overlay, QPoint(0, 0)).x()
    margin_right = overlay.width() - label.mapTo(overlay, QPoint(label.width(), 0)).x()
    assert abs(margin_left - margin_right) <= 2  # the message spans the pill: no empty side

    overlay.show_recording()
    overlay.set_text(SPOKEN)
    shoot(overlay, "overlay-recording")
    assert cut_texts(overlay) == [] and overlay.text.text().endswith("your country.")
