"""What a transcription may be asked for, checked against what the model can do before any audio is
decoded: a wrong option is one clear error up front, never a silent default or a traceback later."""

from __future__ import annotations

from collections.abc import Sequence

from sayso.engine.errors import SaysoError

TASKS = ("transcribe", "translate")


def check_options(model: str, languages: Sequence[str], can_translate: bool, language: str | None, task: str) -> None:
    """Raise SaysoError when ``model`` (which hears ``languages``, any when its file names none, and
    translates if ``can_translate``) can't do ``task`` in ``language`` (None: the model's own or the one
    it detects)."""
    if task not in TASKS:
        raise SaysoError(f"Unknown task {task!r}: it is one of {', '.join(TASKS)}.")
    if task == "translate" and not can_translate:
        raise SaysoError(f"{model} can't translate: it only transcribes. "
                         "Use a multilingual Whisper model (whisper-base, whisper-small, ...) to translate into English.")
    if language is not None and languages and language not in languages:
        known = ", ".join(languages)
        one = "" if len(languages) > 1 else " only"
        raise SaysoError(f"{model} doesn't know the language {language!r}; it hears{one} {known}. "
                         "Leave --language out to use the model's own or the one it detects.")
