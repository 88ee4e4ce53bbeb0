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

from sayso.app.core.profiles import Profile, read_profiles
from sayso.app.core.text.vocabulary import parse_replacements
from sayso.engine import write_text_atomically

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
    # What the engine's text goes through before it is written (app.core.text):
    spoken_commands: bool = True  # "comma", "new line", "scratch that"... become what they say
    remove_fillers: bool = False  # "um", "uh"... are dropped
    replacements: str = ""  # "spoken form -> written form" lines (app.core.text.vocabulary's file format)
    cleanup: bool = False  # send the text to a language model to fix punctuation and fillers
    cleanup_url: str = "http://127.0.0.1:8080/v1"  # an OpenAI-compatible server (llama.cpp's; Ollama: :11434/v1)
    cleanup_model: str = ""
    cleanup_prompt: str = ""  # "" = app.core.text.cleanup.DEFAULT_PROMPT
    cleanup_timeout: float = 5.0  # seconds; slower or failing, the text is written without the cleanup
    cleanup_api_key: str = ""
    profiles: tuple[Profile, ...] = ()  # per-app choices (app.core.profiles), the first match wins

    def with_changes(self, **changes) -> Settings:
        return replace(self, **changes)

    @property
    def prompt(self) -> str | None:
        """The vocabulary as the model's prompt, or None when the user gave none."""
        words = " ".join(self.vocabulary.split())
        return words or None


_CHOICES = {"mode": MODES, "delivery": DELIVERY_METHODS, "device": DEVICES}


def _replacements(value: str) -> str:
    parse_replacements(value)  # a file edited by hand may hold a line the rules can't read
    return value


def _timeout(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 600:
        raise ValueError("a number of seconds from 0 to 600")
    return float(value)


# Values that need more than a type check: each reads the JSON value or raises ValueError.
_READERS = {"replacements": _replacements, "cleanup_timeout": _timeout, "profiles": read_profiles}


def _clean(raw: dict) -> dict:
    """Keep the known keys whose values have the right type and, for choices, an allowed value."""
    defaults = Settings()
    clean = {}
    for f in fields(Settings):
        if f.name not in raw:
            continue
        value = raw[f.name]
        try:
            if f.name in _READERS:
                value = _READERS[f.name](value)
            elif not isinstance(value, type(getattr(defaults, f.name))):
                raise ValueError(f"not a {type(getattr(defaults, f.name)).__name__}")
            if f.name in _CHOICES and value not in _CHOICES[f.name]:
                raise ValueError(f"not one of {', '.join(_CHOICES[f.name])}")
        except (TypeError, ValueError) as error:
            log.warning("settings: ignoring %s=%r (%s)", f.name, value, error)
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
        # The user's alone (0600): it may hold an API key, and the vocabulary says what they write about.
        write_text_atomically(self.path, json.dumps(asdict(settings), indent=2) + "\n", mode=0o600)
