"""The capital of a text's first word, set or taken away by the text rules.

Taking a capital away is the risky direction: a model capitalises names, "I" and acronyms for reasons the
rules can't see, so only a word that is capitalised and nothing more ("How", "The") is lowercased;
"I", "I'm", "NASA", "iPhone" and "McDonald" keep their case.
"""

from __future__ import annotations

import re

_FIRST_WORD = re.compile(r"^(?P<lead>[^\w\n]*)(?P<word>[\w'’-]+)")
_PRONOUN_I = re.compile(r"^I(?:['’]\w+)?$")


def capitalise_first(text: str) -> str:
    """``text`` with the first letter of its first word in capitals ('"hello' -> '"Hello')."""
    match = _FIRST_WORD.match(text)
    if match is None:
        return text
    start = match.start("word")
    return text[:start] + text[start].upper() + text[start + 1:]


def lowercase_first(text: str) -> str:
    """``text`` with its first word lowercased if that word is merely capitalised: an uppercase first
    letter and no other capital, and not the pronoun I in any of its forms (I, I'm, I'll, I'd, I've)."""
    match = _FIRST_WORD.match(text)
    if match is None:
        return text
    word = match.group("word")
    if _PRONOUN_I.match(word) or not word[0].isupper() or any(c.isupper() for c in word[1:]):
        return text
    start = match.start("word")
    return text[:start] + word[0].lower() + text[start + 1:]


def starts_capitalised(text: str) -> bool:
    """Whether the first letter of ``text``'s first word is a capital."""
    match = _FIRST_WORD.match(text)
    return match is not None and match.group("word")[0].isupper()
