"""A dictation written right after the previous one in the same field: the space and the capital between.

Each dictation is transcribed alone, so the model starts it as a new sentence ("I'll call. Tomorrow");
what comes before it in the field decides whether it really is one ("I'll call tomorrow").
"""

from __future__ import annotations

import re

from sayso.app.core.text.case import capitalise_first, lowercase_first

_SENTENCE_END = re.compile(r"[.?!…][\"'’”»)\]]*\Z")
_OPENING = ("(", "[", "“", "‘", "«")
_FOLLOWS_A_WORD = ",.;:!?…)]”’»"


def join_to(previous: str | None, text: str) -> str:
    """The text to insert right after ``previous``, the text Sayso wrote last into the same field (None:
    a new place, where ``text`` starts as the model wrote it).

    After a sentence end (. ? ! ..., possibly followed by a closing quote or parenthesis) comes a space
    and a capital; after a line break, the capital alone; after anything else (a word, , ; :) a space and
    the first word lowercased unless it is "I" or has more capitals ("NASA"). No space is added where
    ``previous`` ends with one or an opening parenthesis, or where ``text`` starts with punctuation that
    follows a word (", and") or a line break the user dictated. Spaces at either end of ``text`` go;
    empty text stays empty.
    """
    text = text.strip(" \t")
    if not text or not previous or text.startswith("\n") or text[0] in _FOLLOWS_A_WORD or previous.endswith(_OPENING):
        return text
    if previous.endswith("\n"):
        return capitalise_first(text)
    space = "" if previous.endswith((" ", "\t")) else " "
    if _SENTENCE_END.search(previous.rstrip(" \t")):
        return space + capitalise_first(text)
    return space + lowercase_first(text)
