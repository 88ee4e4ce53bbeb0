"""Per-app profiles: a dictation into a given app uses that app's model, language, delivery and commands.

A profile names its app as the desktop does: the window's class on X11 (xprop's WM_CLASS, e.g.
"firefox", "code", "xterm"), the app id on Wayland where the compositor tells it (sway: "foot",
"org.gnome.gedit"). Names compare case-insensitively and whole; the first profile that matches wins,
and an empty field keeps what Settings say. A profile's model is loaded beside the usual one the first
time it is needed (the engine keeps one other model), so switching between two apps reloads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sayso.app.core.text.pipeline import TextRules
from sayso.app.core.writing import text_rules

PROFILE_DELIVERY = ("", "paste", "type")  # "" = as Settings say


@dataclass(frozen=True)
class Profile:
    app: str  # the window class (X11) or app id (Wayland)
    model: str = ""  # a model name or .gguf path; "" = the model chosen in Settings
    language: str = ""  # "" = the language chosen in Settings
    delivery: str = ""  # paste | type; "" = the delivery chosen in Settings
    commands: bool = True  # spoken commands ("comma", "new line", "scratch that"...) on in this app

    def matches(self, app: str) -> bool:
        return bool(app) and self.app.strip().lower() == app.strip().lower()


def read_profiles(value) -> tuple[Profile, ...]:
    """Profiles from their JSON form (a list of objects); ValueError says what is wrong."""
    if not isinstance(value, (list, tuple)):
        raise ValueError("profiles must be a list")
    profiles = []
    for number, item in enumerate(value, 1):
        if isinstance(item, Profile):
            profiles.append(item)
            continue
        if not isinstance(item, dict):
            raise ValueError(f"profile {number} is not an object")
        known = {f.name: f for f in fields(Profile)}
        for key, field_value in item.items():
            if key not in known or not isinstance(field_value, type(getattr(Profile(""), key))):
                raise ValueError(f"profile {number}: {key}={field_value!r} is not a known setting")
        if not item.get("app", "").strip():
            raise ValueError(f"profile {number} names no app")
        if item.get("delivery", "") not in PROFILE_DELIVERY:
            raise ValueError(f"profile {number}: delivery must be paste or type")
        profiles.append(Profile(**item))
    return tuple(profiles)


@dataclass(frozen=True)
class DictationChoices:
    """What one dictation uses: Settings, with the focused app's profile over them."""

    app: str  # the focused app's name ("" when unknown)
    profile: Profile | None
    model: str | None  # a model other than the loaded one (a profile's), or None
    language: str | None
    delivery: str
    rules: TextRules


def choices_for(settings, app: str) -> DictationChoices:
    """The choices for a dictation into ``app`` under ``settings`` (an ``app.core.settings.Settings``)."""
    profile = next((p for p in settings.profiles if p.matches(app)), None)
    model = profile.model if profile and profile.model and profile.model != settings.model else None
    language = (profile.language if profile and profile.language else settings.language) or None
    delivery = profile.delivery if profile and profile.delivery else settings.delivery
    commands = profile.commands if profile else settings.spoken_commands
    return DictationChoices(app, profile, model, language, delivery, text_rules(settings, commands=commands))
