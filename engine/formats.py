"""A Transcript as text the user keeps: plain text, JSON, SRT or WebVTT subtitles.

Every rendering comes without a trailing newline; the caller adds one when it prints or writes the file.
JSON is a single line, so transcripts of several files printed one after another form JSON Lines.
"""

from __future__ import annotations

import json

from sayso.engine.transcript import Segment, Transcript

FORMATS = ("txt", "json", "srt", "vtt")


def render(transcript: Transcript, fmt: str, file: str | None = None) -> str:
    """``transcript`` in ``fmt`` ('txt', 'json', 'srt' or 'vtt'); ``file`` names the source in JSON."""
    if fmt == "txt":
        return transcript.text
    if fmt == "json":
        return _json(transcript, file)
    if fmt == "srt":
        cues = _cues(transcript.segments)
        return "\n\n".join(
            f"{index}\n{_timestamp(start, ',')} --> {_timestamp(end, ',')}\n{text}"
            for index, (start, end, text) in enumerate(cues, start=1)
        )
    if fmt == "vtt":
        cues = _cues(transcript.segments)
        return "\n\n".join(
            ["WEBVTT"]
            + [f"{_timestamp(start, '.')} --> {_timestamp(end, '.')}\n{_vtt_escape(text)}" for start, end, text in cues]
        )
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _json(transcript: Transcript, file: str | None) -> str:
    # Times to the millisecond and probabilities to 4 places: more digits are float noise, not information.
    document = {
        "file": file,
        "text": transcript.text,
        "language": transcript.language,
        "duration": round(transcript.duration, 3),
        "segments": [
            {
                "start": round(segment.start, 3),
                "end": round(segment.end, 3),
                "text": segment.text,
                "tokens": [
                    {"id": token.id, "text": token.text, "start": round(token.start, 3), "p": round(token.probability, 4)}
                    for token in segment.tokens
                ],
            }
            for segment in transcript.segments
        ],
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _cues(segments: list[Segment]) -> list[tuple[float, float, str]]:
    """(start, end, text) of each segment that has text. Subtitle readers end a cue at a blank line, so
    blank lines inside a segment's text are dropped and empty segments are left out."""
    cues = []
    for segment in segments:
        text = "\n".join(line.strip() for line in segment.text.strip().splitlines() if line.strip())
        if text:
            cues.append((segment.start, max(segment.end, segment.start), text))
    return cues


def _timestamp(seconds: float, decimal_mark: str) -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (WebVTT); hours go past 99 rather than wrap."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_mark}{millis:03d}"


def _vtt_escape(text: str) -> str:
    """WebVTT cue text is markup: '&' and '<' start entities and tags, and '-->' would end the timing."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
