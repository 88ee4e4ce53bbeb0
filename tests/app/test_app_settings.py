"""Settings: JSON in the data folder, tolerant of missing, damaged and unknown content."""

import json

from e2e.fixtures import portal, session_bus  # noqa: F401 - fixtures

from sayso.app.core.settings import Settings, SettingsStore


def test_defaults_when_there_is_no_file(tmp_path):
    assert SettingsStore(tmp_path / "settings.json").load() == Settings()


def test_round_trip_keeps_every_field(tmp_path):
    store = SettingsStore(tmp_path / "sub" / "settings.json")
    chosen = Settings(
        model="/models/base.gguf", device="cpu", language="de", vocabulary="Sayso, Kubernetes",
        hotkey="alt_r", mode="toggle", delivery="type", input_device="USB Mic", cues=False,
        overlay=False, live_preview=False,
    )  # fmt: skip
    store.save(chosen)
    assert store.load() == chosen
    assert json.loads(store.path.read_text())["hotkey"] == "alt_r"  # readable by a person
    assert not list(store.path.parent.glob("*.tmp"))  # the atomic write left nothing behind


def test_bad_values_and_unknown_keys_fall_back_to_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mode": "sometimes", "cues": "yes", "language": "fr", "colour": "blue"}))
    loaded = SettingsStore(path).load()
    assert loaded == Settings(language="fr")


def test_a_damaged_file_gives_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{ not json")
    assert SettingsStore(path).load() == Settings()
    path.write_text("[1, 2]")
    assert SettingsStore(path).load() == Settings()


def test_vocabulary_becomes_the_prompt():
    assert Settings().prompt is None
    assert Settings(vocabulary="  Sayso,\n  Dr. Okafor ").prompt == "Sayso, Dr. Okafor"


def test_settings_and_log_follow_the_xdg_folders(tmp_path, monkeypatch):
    """The default data folder: settings in $XDG_CONFIG_HOME (moved there from where earlier versions
    kept them), the log in $XDG_STATE_HOME. A data folder of its own keeps both."""
    from sayso.app.platform.locations import log_file, settings_file
    from sayso.engine.models import data_dir

    monkeypatch.delenv("SAYSO_DATA_DIR", raising=False)
    for variable in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))
    data = data_dir()
    data.mkdir(parents=True)
    (data / "settings.json").write_text('{"mode": "toggle"}')
    path = settings_file(data)
    assert path == tmp_path / "xdg_config_home" / "sayso" / "settings.json"
    assert SettingsStore(path).load().mode == "toggle" and not (data / "settings.json").exists()
    assert log_file(data) == tmp_path / "xdg_state_home" / "sayso" / "sayso.log"
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path / "portable"))
    assert settings_file(data_dir()) == tmp_path / "portable" / "settings.json"
    assert log_file(data_dir()) == tmp_path / "portable" / "sayso.log"


def _texts(widget) -> str:
    from PySide6.QtWidgets import QLabel

    return " ".join(child.text() for child in widget.findChildren(QLabel) if child.isVisibleTo(widget))


def test_the_settings_page_says_how_the_shortcut_reaches_sayso(qtbot, tmp_path, monkeypatch, portal):
    """X11: taken from the focused app; Wayland with the portal (a double on a real session bus): through
    it, hold to talk working; Wayland without one: the hint to bind ``sayso --toggle``."""
    from sayso.app.platform.hotkeys import WAYLAND_HINT
    from sayso.app.ui.settings_view import SettingsPage

    def page_text() -> str:
        page = SettingsPage(Settings(), tmp_path)
        qtbot.addWidget(page)
        return _texts(page)

    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    assert "X11: Sayso takes the shortcut for itself" in page_text()
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    text = page_text()
    assert "global-shortcuts portal, so hold to talk works" in text and WAYLAND_HINT not in text
    portal.close()
    assert WAYLAND_HINT in page_text()
