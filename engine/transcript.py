"""What a transcription returns, whatever the model family: text, timed segments, timed tokens."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Token:
    """One output token with the time (seconds, from the start of the file) at which it starts."""

    id: int
    text: str
    start: float
    probability: float = 1.0


@dataclass
class Segment:
    """A stretch of speech between two timestamps, in seconds from the start of the file."""

    start: float
    end: float
    text: str
    tokens: list[Token] = field(default_factory=list)


def not_before(segments: list[Segment], earliest: float) -> None:
    """Move every segment and token time before ``earliest`` (seconds) up to it, in place."""
    for segment in segments:
        segment.start = min(max(segment.start, earliest), segment.end)
        for token in segment.tokens:
            token.start = min(max(token.start, earliest), segment.end)


@dataclass
class Transcript:
    """A finished transcription. ``text`` is the segments' text joined with single spaces; ``warnings``
    say what was repaired in the audio or missing from it (``engine.audio.Warnings``), one line each."""

    text: str
    segments: list[Segment]
    language: str = ""
    duration: float = 0.0
    model: str = ""
    warnings: list[str] = field(default_factory=list)
