"""The user's replacements: words the model writes one way and the user wants written another ("jay son"
-> "JSON", "say so" -> "Sayso"), and the file they are kept and shared in.

The file has one replacement a line, ``spoken form -> written form``; lines starting with ``#`` are
comments and blank lines are skipped (a ``#`` further on is part of the form: "c sharp -> C#").

The case of a written form: one with a capital letter or a digit is a name the user spelled out
("JSON", "K8s", "iPhone") and is written exactly as given; an all-lowercase one is an ordinary
word and takes the capital of the words it replaces, so it starts a sentence as any word would
("sayso" -> "Sayso" when the model wrote "Say so").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sayso.app.core.text.case import capitalise_first, starts_capitalised

ARROW = "->"
EXAMPLE = "jay son -> JSON"
HEADER = f"""\
# Sayso replacements: one a line, what you say {ARROW} what Sayso writes, e.g.
#   {EXAMPLE}
# What you say is matched as whole words in any case. A written form with a capital letter or a digit is
# written exactly as given; an all-lowercase one starts with a capital where a sentence starts.
# Lines starting with # are comments.
"""


@dataclass(frozen=True)
class Replacement:
    """Write ``written`` where the model wrote ``spoken``."""

    spoken: str
    written: str


def read_replacements_file(path: Path) -> tuple[str, tuple[Replacement, ...]]:
    """A replacements file's text and its replacements. ValueError says what is wrong in the file (not
    UTF-8, a bad line), for the caller to put after the file's name; OSError, that it can't be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"not UTF-8 text: save it as UTF-8, one 'spoken form {ARROW} written form' a line.") from None
    return text, parse_replacements(text)


def parse_replacements(text: str) -> tuple[Replacement, ...]:
    """The replacements of a replacements file, in its order.

    Raises ``ValueError`` naming the first bad line and what to write instead: a line without the arrow,
    with nothing on one side of it, or repeating a spoken form (in any case) of an earlier line.
    """
    items: list[Replacement] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        spoken, arrow, written = (" ".join(side.split()) for side in line.partition(ARROW))
        if not arrow:
            raise ValueError(f"Line {number} has no '{ARROW}': write what you say, '{ARROW}', then what Sayso "
                             f"should write, e.g. '{EXAMPLE}'.")
        if not spoken:
            raise ValueError(f"Line {number} has nothing before '{ARROW}': write what you say there, "
                             f"e.g. '{EXAMPLE}'.")
        if not written:
            raise ValueError(f"Line {number} has nothing after '{ARROW}': write what Sayso should write there, "
                             f"e.g. '{EXAMPLE}', or delete the line.")
        key = spoken.lower()
        if key in seen:
            raise ValueError(f"Line {number} repeats '{spoken}' of line {seen[key]}: keep one of the two lines.")
        seen[key] = number
        items.append(Replacement(spoken, written))
    return tuple(items)


def format_replacements(items: Iterable[Replacement]) -> str:
    """The replacements file of ``items``: the header explaining the format, then one line each."""
    return HEADER + "".join(f"{item.spoken} {ARROW} {item.written}\n" for item in items)


def apply_replacements(text: str, items: Iterable[Replacement]) -> str:
    """``text`` with every spoken form of ``items`` replaced by its written form.

    Matches are whole words in any case, with any run of whitespace where the spoken form has a space;
    where two spoken forms overlap, the longer one wins ("new york city" before "new york").
    """
    written = {" ".join(item.spoken.split()).lower(): item.written for item in items if item.spoken.strip()}
    if not written:
        return text
    alternatives = (r"\s+".join(map(re.escape, spoken.split())) for spoken in sorted(written, key=len, reverse=True))
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)

    def replace(match: re.Match) -> str:
        # A letter whose lowercase is longer ("İ") can match without its key: such a match stays as it is.
        form = written.get(" ".join(match.group().split()).lower(), match.group())
        return form if _as_given(form) or not starts_capitalised(match.group()) else capitalise_first(form)

    return pattern.sub(replace, text)


def _as_given(written: str) -> bool:
    """Whether ``written`` is written exactly as given: it has a capital letter or a digit."""
    return any(c.isupper() or c.isdigit() for c in written)
