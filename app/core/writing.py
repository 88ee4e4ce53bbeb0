"""From the engine's words to the text Sayso writes: the user's text rules, then the optional cleanup,
as Settings ask for them; the same for a dictation and for ``sayso transcribe --dictation``.

The rules (spoken commands, fillers, vocabulary: ``app.core.text``) are instant; the cleanup asks a
language model over HTTP and may take seconds or fail. A cleanup that fails or is too slow costs nothing
but itself: the text is written as the rules made it, and the reason goes with it (``Written.note``)
for the History. No Qt here: the app runs ``write_text`` on a thread of its own (``app.core.writer``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sayso.app.core.text.cleanup import DEFAULT_PROMPT, Cleanup, CleanupFailed, clean_up
from sayso.app.core.text.pipeline import TextRules, apply_rules
from sayso.app.core.text.vocabulary import parse_replacements

log = logging.getLogger(__name__)


def text_rules(settings, commands: bool | None = None) -> TextRules:
    """The text rules ``settings`` (an ``app.core.settings.Settings``) ask for; ``commands``: a profile's
    choice over theirs."""
    return TextRules(
        commands=settings.spoken_commands if commands is None else commands,
        fillers=settings.remove_fillers,
        replacements=parse_replacements(settings.replacements),
    )


def cleanup_for(settings) -> Cleanup | None:
    """The cleanup ``settings`` ask for, or None when it is off."""
    if not settings.cleanup:
        return None
    return Cleanup(url=settings.cleanup_url, model=settings.cleanup_model,
                   prompt=settings.cleanup_prompt.strip() or DEFAULT_PROMPT, timeout=settings.cleanup_timeout,
                   api_key=settings.cleanup_api_key)  # fmt: skip


@dataclass(frozen=True)
class Written:
    key: object  # what the caller passed to ``write``
    raw: str  # the engine's words
    text: str  # what to write: the rules' text, cleaned up where that was asked and worked
    note: str = ""  # why the cleanup didn't apply ("" when it did or wasn't asked)


def write_text(raw: str, rules: TextRules, cleanup: Cleanup | None) -> tuple[str, str]:
    """The written text of ``raw`` and a note saying why a cleanup asked for didn't apply."""
    text = apply_rules(raw, rules)
    if cleanup is None or not text.strip():
        return text, ""
    try:
        return clean_up(text, cleanup), ""
    except CleanupFailed as error:
        log.warning("cleanup: %s", error)
        return text, f"Written without the cleanup: {error}"


JOIN_SECONDS = 300.0
"""How long a window counts as "the same field" after Sayso wrote into it. Neither X11 nor Wayland says
which field of a window has the caret, nor whether the user typed there since; dictations minutes apart
into one window are nearly always one text, and a stray space in a new field costs less than words run
together."""


class LastWritten:
    """What Sayso wrote last, and where: the text a new dictation into the same window joins."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._last: tuple[str, str, float] | None = None  # window, text, when

    def remember(self, window: str | None, text: str) -> None:
        self._last = (window, text, self._clock()) if window is not None else None

    def previous(self, window: str | None) -> str | None:
        """The text written last into ``window`` if it is the same field still, else None (a new place)."""
        if window is None or self._last is None:
            return None
        last_window, text, when = self._last
        return text if last_window == window and self._clock() - when < JOIN_SECONDS else None
