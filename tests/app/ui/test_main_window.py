"""The main window and its pages, the overlay and the coordinator, offscreen with the real engine."""

import configparser
import json
import os
import shlex
import subprocess
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from sayso.app.ui.coordinator import Coordinator  # noqa: E402
from sayso.app.main import run_command  # noqa: E402
from sayso.app.ui.overlay import Overlay  # noqa: E402
from sayso.app.core.settings import Settings  # noqa: E402
from sayso.app.platform.locations import DESKTOP_ID  # noqa: E402
from e2e.fixtures import pulse  # noqa: E402, F401

from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402
from support.texts import words  # noqa: E402

MODEL = TINY_EN_GGUF
JFK = AUDIO / "jfk.wav"


@pytest.fixture
def coordinator(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "settings.json").write_text(json.dumps({"model": str(MODEL), "device": "cpu", "cues": False}))
    c = Coordinator(tmp_path)
    qtbot.addWidget(c.window)
    with qtbot.waitSignal(c.client.loaded, timeout=120_000):
        c.start(hotkeys=False, microphone=False)
    yield c
    c.shutdown()


def test_overlay_never_takes_the_focus(qtbot):
    overlay = Overlay()
    qtbot.addWidget(overlay)
    flags = overlay.windowFlags()
    for flag in (
        Qt.WindowType.WindowDoesNotAcceptFocus,
        Qt.WindowType.Tool,
        Qt.WindowType.WindowStaysOnTopHint,
        Qt.WindowType.WindowTransparentForInput,
        Qt.WindowType.FramelessWindowHint,
    ):
        assert flags & flag, flag
    assert overlay.testAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
    assert overlay.focusPolicy() == Qt.FocusPolicy.NoFocus
    overlay.show_recording()
    assert overlay.isVisible() and overlay.state.text() == "Listening"
    overlay.set_text("word " * 100 + "the last words")
    assert overlay.text.text().endswith("the last words") and overlay.text.text().startswith("… word")
    overlay.show_message("Inserted", "ok", timeout_ms=100)
    qtbot.waitUntil(lambda: not overlay.isVisible(), timeout=2000)


def test_window_pages_and_engine_status(coordinator):
    window = coordinator.window
    assert window.status_title.full_text() == coordinator.client.model_name
    assert coordinator.dictation_page.state.text() == "Ready"
    assert "Ctrl+Space" in coordinator.dictation_page.header.subtitle.text()
    for page in ("files", "history", "settings", "dictation"):
        window.show_page(page)
        assert window.current_page() == page


def test_settings_changes_are_saved_and_applied(coordinator, qtbot):
    page = coordinator.settings_page
    page.mode.setCurrentIndex(page.mode.findData("toggle"))
    page.delivery.setCurrentIndex(page.delivery.findData("type"))
    saved = json.loads((coordinator.data_dir / "settings.json").read_text())
    assert saved["mode"] == "toggle" and saved["delivery"] == "type"
    assert coordinator.settings.mode == "toggle"
    assert "again" in coordinator.dictation_page.header.subtitle.text()  # the hint follows the mode
    page.vocabulary.setPlainText("Sayso, Okafor")
    qtbot.waitUntil(lambda: coordinator.settings.prompt == "Sayso, Okafor", timeout=3000)


def test_start_at_login_is_an_autostart_entry(coordinator, tmp_path):
    entry = tmp_path / "config" / "autostart" / f"{DESKTOP_ID}.desktop"
    coordinator.settings_page.start_at_login.setChecked(True)
    desktop = configparser.ConfigParser(interpolation=None)
    desktop.read(entry)
    command = shlex.split(desktop["Desktop Entry"]["Exec"])
    assert desktop["Desktop Entry"]["Type"] == "Application" and command[-1] == "--hidden"
    assert os.access(command[0], os.X_OK)
    coordinator.settings_page.start_at_login.setChecked(False)
    assert not entry.exists() and not coordinator.settings.start_at_login
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(desktop_text := "[Desktop Entry]\nType=Application\nExec=sayso --hidden\n")
    restarted = Coordinator(coordinator.data_dir)  # the entry, made elsewhere, is what the page shows
    assert restarted.settings.start_at_login and entry.read_text() == desktop_text
    restarted.shutdown()


def test_an_autostart_entry_of_the_earlier_name_is_on_and_replaced(coordinator, tmp_path):
    """Before the entry took the desktop id for its name it was sayso.desktop: one written then still
    reads as on, and turning the setting off removes it."""
    earlier = tmp_path / "config" / "autostart" / "sayso.desktop"
    earlier.parent.mkdir(parents=True, exist_ok=True)
    earlier.write_text("[Desktop Entry]\nType=Application\nExec=sayso --hidden\n")
    restarted = Coordinator(coordinator.data_dir)
    assert restarted.settings.start_at_login and restarted.settings_page.start_at_login.isChecked()
    restarted.settings_page.start_at_login.setChecked(False)
    assert not earlier.exists() and not restarted.settings.start_at_login
    restarted.shutdown()


def test_the_autostart_entry_starts_sayso_where_its_environment_isnt_on_path(coordinator, tmp_path, monkeypatch):
    """A virtual environment the user never put on PATH: the entry runs this Python with Sayso's module,
    from wherever the desktop starts it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `sayso` command here
    coordinator.settings_page.start_at_login.setChecked(True)
    desktop = configparser.ConfigParser(interpolation=None)
    desktop.read(tmp_path / "config" / "autostart" / f"{DESKTOP_ID}.desktop")
    command = shlex.split(desktop["Desktop Entry"]["Exec"])
    assert command[0] == sys.executable and command[-1] == "--hidden"
    started = subprocess.run([*command[:-1], "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0 and "sayso" in started.stdout.lower(), started.stderr
    coordinator.settings_page.start_at_login.setChecked(False)


def test_a_file_opened_with_sayso_is_transcribed_on_the_files_page(coordinator, qtbot):
    run_command(coordinator, f"open {JFK}")
    assert coordinator.window.isVisible() and coordinator.window.current_page() == "files"
    job = coordinator.files_page.selected()
    qtbot.waitUntil(lambda: job.transcript is not None, timeout=120_000)
    assert "ask not what your country" in job.transcript.text.lower()


def test_shortcut_field_records_a_chord(coordinator, qtbot):
    field = coordinator.settings_page.shortcut
    coordinator.window.show()
    coordinator.window.show_page("settings")
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    window = field.window().windowHandle()
    QTest.keyPress(window, Qt.Key.Key_Control, Qt.KeyboardModifier.ControlModifier)
    QTest.keyPress(window, Qt.Key.Key_F9, Qt.KeyboardModifier.ControlModifier)
    QTest.keyRelease(window, Qt.Key.Key_F9, Qt.KeyboardModifier.ControlModifier)
    QTest.keyRelease(window, Qt.Key.Key_Control)
    assert field.value() == "ctrl+f9"
    assert coordinator.settings.hotkey == "ctrl+f9"
    assert field.text() == "Ctrl+F9"


def test_history_page_search_retranscribe_and_delete(coordinator, qtbot):
    import soundfile

    pcm, _ = soundfile.read(JFK, dtype="float32")
    history = coordinator.history
    first = history.add(pcm[: 16000 * 3], "old")
    history.fail(first.id, "No model.")
    second = history.add(pcm, "old")
    history.finish(second.id, "something else entirely", "old")
    page = coordinator.history_page
    page.refresh(select=second.id)
    assert page.list.count() == 2
    page.search.setText("else")
    qtbot.waitUntil(lambda: page.list.count() == 1, timeout=2000)
    page.search.setText("")
    qtbot.waitUntil(lambda: page.list.count() == 2, timeout=2000)
    page.refresh(select=second.id)
    with qtbot.waitSignal(page.entry_changed, timeout=120_000):
        page.retranscribe_selected()
    entry = history.get(second.id)
    assert entry.status == "done" and "ask not what your country can do for you" in words(entry.text)
    assert words(coordinator.dictation_page.recent_texts()[0]) == words(entry.text)
    page.refresh(select=first.id)
    page.delete_selected()
    assert history.get(first.id) is None and page.list.count() == 1


def test_record_button_dictation_with_a_real_microphone(coordinator, qtbot, pulse):
    coordinator.rescan_microphones()  # the sound server started after PortAudio listed the devices
    assert coordinator.microphone.is_open and coordinator.state == "ready"
    button = coordinator.dictation_page.record
    states = []
    coordinator.flow.state_changed.connect(states.append)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert coordinator.state == "recording" and coordinator.overlay.isVisible()
    subprocess.run(["paplay", "--device=vsink", str(JFK)], env={**os.environ, **pulse.env}, check=True)
    with qtbot.waitSignal(coordinator.flow.dictation_done, timeout=120_000) as done:
        QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    text, delivery = done.args
    assert delivery is None  # started from the window: the text stays in Sayso
    assert "ask not what your country can do for you" in words(text)
    assert states[:3] == ["recording", "transcribing", "ready"]
    (entry,) = coordinator.history.search()
    assert entry.text == text and entry.audio_path.exists() and entry.duration > 10
    assert coordinator.dictation_page.recent_texts() == [text]
    assert coordinator.settings == Settings(model=str(MODEL), device="cpu", cues=False)
