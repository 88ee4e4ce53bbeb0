"""The user's choices, kept as JSON (``settings.json``, where ``app.locations`` says).

JSON rather than QSettings so that the file is readable by a person, sits in a test's own data folder,
and is loaded the same way by the tests. A missing, damaged or partly unknown file never stops
the app: unknown keys are dropped and bad values fall back to their defaults.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from sayso.engine.files import write_text_atomically

log = logging.getLogger(__name__)

MODES = ("hold", "toggle")
DELIVERY_METHODS = ("paste", "type")
DEVICES = ("auto", "gpu", "cpu")


@dataclass(frozen=True)
class Settings:
    """Everything the settings page shows. Empty strings mean "the default" (model, language, microphone)."""

    model: str = ""  # a model name or .gguf path; "" = the default model (Whisper tiny.en)
    device: str = "auto"  # where the engine runs: auto, gpu, cpu
    language: str = ""  # spoken language code ("en", "de", ...); "" = detect
    vocabulary: str = ""  # names and terms, passed to the model as its prompt
    hotkey: str = "ctrl+space"
    mode: str = "hold"  # hold: record while the shortcut is held; toggle: press to start, press to stop
    delivery: str = "paste"  # paste: through the clipboard (restored after); type: simulated keystrokes
    input_device: str = ""  # microphone name as sounddevice lists it; "" = the system's default input
    cues: bool = True  # short sounds when recording starts and stops
    overlay: bool = True  # the small floating recording indicator
    live_preview: bool = True  # show the words so far while recording
    hands_free: bool = False  # a dictation started by a toggle stops by itself when the speaker pauses
    start_at_login: bool = False  # an XDG autostart entry starts Sayso in the tray (app.autostart)

    def with_changes(self, **changes) -> Settings:
        return replace(self, **changes)

    @property
    def prompt(self) -> str | None:
        """The vocabulary as the model's prompt, or None when the user gave none."""
        words = " ".join(self.vocabulary.split())
        return words or None


_CHOICES = {"mode": MODES, "delivery": DELIVERY_METHODS, "device": DEVICES}


def _clean(raw: dict) -> dict:
    """Keep the known keys whose values have the right type and, for choices, an allowed value."""
    defaults = Settings()
    clean = {}
    for f in fields(Settings):
        if f.name not in raw:
            continue
        value = raw[f.name]
        wanted = type(getattr(defaults, f.name))
        if not isinstance(value, wanted) or (f.name in _CHOICES and value not in _CHOICES[f.name]):
            log.warning("settings: ignoring %s=%r (not a valid value)", f.name, value)
            continue
        clean[f.name] = value
    return clean


class SettingsStore:
    """Loads and saves ``Settings`` at ``path``; saving is atomic (write a temp file, then rename)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> Settings:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Settings()
        except (OSError, ValueError) as error:
            log.warning("settings: %s is unreadable (%s); using defaults", self.path, error)
            return Settings()
        if not isinstance(raw, dict):
            return Settings()
        return Settings(**_clean(raw))

    def save(self, settings: Settings) -> None:
        write_text_atomically(self.path, json.dumps(asdict(settings), indent=2) + "\n")
