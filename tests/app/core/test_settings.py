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
    monkeypatch.delenv("SWAYSOCK", raising=False)  # not sway (tests/e2e: the route on sway)
    monkeypatch.setenv("DISPLAY", ":0")
    assert "X11: Sayso takes the shortcut for itself" in page_text()
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    text = page_text()
    assert "global-shortcuts portal, so hold to talk works" in text and WAYLAND_HINT not in text
    portal.close()
    assert WAYLAND_HINT in page_text()


def test_the_text_settings_and_profiles_round_trip_and_the_file_is_private(tmp_path):
    from sayso.app.core.profiles import Profile

    store = SettingsStore(tmp_path / "settings.json")
    chosen = Settings(
        spoken_commands=False, remove_fillers=True, replacements="jay son -> JSON\nsay so -> Sayso",
        cleanup=True, cleanup_url="http://127.0.0.1:11434/v1", cleanup_model="qwen3:4b", cleanup_prompt="Fix it.",
        cleanup_timeout=2.5, cleanup_api_key="secret",
        profiles=(Profile("xterm", delivery="type", commands=False), Profile("firefox", model="whisper-base")),
    )  # fmt: skip
    store.save(chosen)
    assert store.load() == chosen
    assert store.path.stat().st_mode & 0o777 == 0o600  # it may hold an API key
    saved = json.loads(store.path.read_text())
    assert saved["profiles"][0] == {"app": "xterm", "model": "", "language": "", "delivery": "type", "commands": False}


def test_text_settings_edited_badly_by_hand_fall_back_to_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({
        "replacements": "jay son JSON",  # no "->"
        "cleanup_timeout": -1,
        "profiles": [{"app": "xterm", "delivery": "carrier pigeon"}],
        "remove_fillers": True,
    }))  # fmt: skip
    assert SettingsStore(path).load() == Settings(remove_fillers=True)
    path.write_text(json.dumps({"cleanup_timeout": 3, "profiles": [{"app": "code", "colour": "red"}]}))
    assert SettingsStore(path).load() == Settings(cleanup_timeout=3.0)


def test_a_profile_overrides_settings_for_its_app_only():
    from sayso.app.core.profiles import Profile, choices_for

    settings = Settings(language="de", delivery="paste", replacements="say so -> Sayso", profiles=(
        Profile("XTerm", language="en", delivery="type", commands=False), Profile("code", model="whisper-base")))
    terminal = choices_for(settings, "xterm")  # the desktop's names compare without case
    assert (terminal.language, terminal.delivery, terminal.rules.commands) == ("en", "type", False)
    assert terminal.model is None
    assert terminal.rules.replacements == choices_for(settings, "").rules.replacements  # vocabulary is everyone's
    editor = choices_for(settings, "code")
    assert (editor.model, editor.language, editor.delivery) == ("whisper-base", "de", "paste")
    assert editor.rules.commands
    other = choices_for(settings, "firefox")
    assert (other.profile, other.model, other.language, other.delivery) == (None, None, "de", "paste")
    assert choices_for(settings.with_changes(model="whisper-base"), "code").model is None  # the session's already


def test_the_settings_page_edits_the_text_rules_cleanup_and_profiles(qtbot, tmp_path):
    """Every change applies (``changed`` carries the new Settings); a replacements file that can't be read
    changes nothing and says which line is wrong; export then import gives the same list back."""
    from sayso.app.core.profiles import Profile
    from sayso.app.core.text.vocabulary import parse_replacements
    from sayso.app.ui.settings_view import SettingsPage

    page = SettingsPage(Settings(), tmp_path)
    qtbot.addWidget(page)
    got = []
    page.changed.connect(got.append)

    page.writing.commands.setChecked(False)
    page.writing.fillers.setChecked(True)
    assert (got[-1].spoken_commands, got[-1].remove_fillers) == (False, True)

    bad = tmp_path / "bad.txt"
    bad.write_text("jay son -> JSON\nk eight s K8s\n")
    page.writing.import_file(bad)
    assert "Line 2" in page.writing.problem.text() and got[-1].replacements == ""
    good = tmp_path / "good.txt"
    good.write_text("jay son -> JSON\nsay so -> Sayso\n")
    page.writing.import_file(good)
    assert parse_replacements(got[-1].replacements) == parse_replacements(good.read_text())
    assert page.writing.problem.isHidden()
    exported = tmp_path / "exported.txt"
    page.writing.export_file(exported)
    assert parse_replacements(exported.read_text()) == parse_replacements(good.read_text())

    page.writing.replacements.setPlainText("half typed")  # not a replacement yet: the last good list stays
    qtbot.waitUntil(lambda: not page.writing.problem.isHidden(), timeout=5000)
    assert parse_replacements(got[-1].replacements) == parse_replacements(good.read_text())

    page.cleanup.enabled.setChecked(True)
    page.cleanup.timeout.setValue(2.5)
    assert (got[-1].cleanup, got[-1].cleanup_timeout) == (True, 2.5)
    qtbot.keyClicks(page.cleanup.model, "qwen3:4b")
    qtbot.waitUntil(lambda: got[-1].cleanup_model == "qwen3:4b", timeout=5000)

    page.profiles.show_last_app("xterm")
    page.profiles.add_button.click()
    assert got[-1].profiles == (Profile("xterm"),)
    delivery = page.profiles.table.cellWidget(0, 3)
    delivery.setCurrentIndex(delivery.findData("type"))
    page.profiles.table.cellWidget(0, 4).setChecked(False)
    assert got[-1].profiles == (Profile("xterm", delivery="type", commands=False),)
    page.profiles.remove_button.click()
    assert got[-1].profiles == ()

    page.load(got[-1].with_changes(profiles=(Profile("code", language="de"),)))  # shown again, no signal
    count = len(got)
    assert page.profiles.profiles() == (Profile("code", language="de"),) and len(got) == count
