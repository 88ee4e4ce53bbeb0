"""Settings: JSON in the data folder, tolerant of missing, damaged and unknown content."""

import json

from app.settings import Settings, SettingsStore


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
