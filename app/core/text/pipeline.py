"""The written text of a dictation: the engine's raw text through the user's text rules."""

from __future__ import annotations

from dataclasses import dataclass

from sayso.app.core.text.commands import apply_spoken_commands, remove_fillers
from sayso.app.core.text.vocabulary import Replacement, apply_replacements


@dataclass(frozen=True)
class TextRules:
    """Which text rules a dictation goes through."""

    commands: bool = True  # spoken punctuation, layout and editing commands
    fillers: bool = False  # drop hesitation fillers
    replacements: tuple[Replacement, ...] = ()


def apply_rules(raw: str, rules: TextRules) -> str:
    """The written text: commands, then fillers, then replacements (so a replacement's written form is
    never read as a command), trimmed of spaces. Line breaks the user dictated at either end stay: "new
    paragraph" may open a dictation."""
    text = raw.strip()
    if rules.commands:
        text = apply_spoken_commands(text)
    if rules.fillers:
        text = remove_fillers(text)
    if rules.replacements:
        text = apply_replacements(text, rules.replacements)
    return text.strip(" \t")
