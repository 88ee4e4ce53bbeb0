"""Spoken commands and hesitation fillers in a dictation's text: what was said, turned into what is meant.

The commands, matched as whole words in any case ("Comma", "FULL STOP"):

    comma                                             ,
    period, full stop                                 .
    question mark                                     ?
    exclamation mark, exclamation point               !
    colon                                             :
    semicolon                                         ;
    ellipsis, dot dot dot                             ...
    dash                                              –  an en dash with a space on each side
    hyphen                                            -  joins the words on each side (well-known)
    slash                                             /  joins the words on each side (and/or)
    apostrophe                                        '  joins the words on each side (John's)
    open quote                                        "  before the quoted words
    close quote, end quote, unquote                   "  after them
    open parenthesis, open paren, open bracket        (
    close parenthesis, close paren, close bracket     )
    new line, newline                                 a line break
    new paragraph                                     a blank line
    scratch that, delete that                         drops the sentence spoken before it

A command word is always a command while commands are on ("the Victorian period" ends in a full stop):
dictation software can't tell the word from the command, and the user can turn commands off.

The model writes its own punctuation and capitals around command words, as if they were words ("Hello
world, period. New line. How are you question mark?"); the commands replace that punctuation:

* punctuation the model put right before or after a command is dropped;
* after a sentence end (. ? !), a new line or a new paragraph the next word starts with a capital; after
  any other command, a word the model capitalised only because of a sentence end it invented there
  ("comma. How") is lowercased, unless it is "I" or a word with more capitals ("NASA");
* no space before , . ? ! : ; ... ) or a closing quote, one space after them; none after an opening
  parenthesis or quote; none around a line break, a hyphen, a slash or an apostrophe.

"Scratch that" drops everything since the last sentence end or line break before it, with the commands
spoken after that sentence ("One. Two, scratch that" keeps "One."): a sentence dictated by mistake goes
whole, the sentences before it stay.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from sayso.app.core.text.case import capitalise_first, lowercase_first, starts_capitalised

CAPITAL, LOWER, KEEP = "capital", "lower", "keep"


@dataclass(frozen=True)
class Mark:
    """What a command writes, whether a space may come before and after it, and the case of the word
    after it: CAPITAL (a sentence starts), LOWER (it goes on) or KEEP (as before the mark)."""

    text: str
    space_before: bool
    space_after: bool
    then: str


FULL_STOP = Mark(".", False, True, CAPITAL)
EXCLAMATION = Mark("!", False, True, CAPITAL)
OPEN_QUOTE = Mark('"', True, False, KEEP)
CLOSE_QUOTE = Mark('"', False, True, KEEP)
OPEN_PARENTHESIS = Mark("(", True, False, KEEP)
CLOSE_PARENTHESIS = Mark(")", False, True, KEEP)
ELLIPSIS = Mark("...", False, True, LOWER)
WORDS = Mark("", True, True, LOWER)  # how the model's words sit between marks
SCRATCH = "scratch"

COMMANDS: dict[str, Mark | str] = {
    "comma": Mark(",", False, True, LOWER),
    "period": FULL_STOP,
    "full stop": FULL_STOP,
    "question mark": Mark("?", False, True, CAPITAL),
    "exclamation mark": EXCLAMATION,
    "exclamation point": EXCLAMATION,
    "colon": Mark(":", False, True, LOWER),
    "semicolon": Mark(";", False, True, LOWER),
    "ellipsis": ELLIPSIS,
    "dot dot dot": ELLIPSIS,
    "dash": Mark("–", True, True, LOWER),
    "hyphen": Mark("-", False, False, LOWER),
    "slash": Mark("/", False, False, LOWER),
    "apostrophe": Mark("'", False, False, LOWER),
    "open quote": OPEN_QUOTE,
    "close quote": CLOSE_QUOTE,
    "end quote": CLOSE_QUOTE,
    "unquote": CLOSE_QUOTE,
    "open parenthesis": OPEN_PARENTHESIS,
    "open paren": OPEN_PARENTHESIS,
    "open bracket": OPEN_PARENTHESIS,
    "close parenthesis": CLOSE_PARENTHESIS,
    "close paren": CLOSE_PARENTHESIS,
    "close bracket": CLOSE_PARENTHESIS,
    "new line": Mark("\n", False, False, CAPITAL),
    "newline": Mark("\n", False, False, CAPITAL),
    "new paragraph": Mark("\n\n", False, False, CAPITAL),
    "scratch that": SCRATCH,
    "delete that": SCRATCH,
}

# The words of a command may come with a hyphen or the model's comma between them ("full-stop",
# "question, mark"); a command never sits inside a hyphenated word ("comma-separated").
_BETWEEN_WORDS = r"(?:\s*[,-]\s*|\s+)"
_PHRASES = (_BETWEEN_WORDS.join(map(re.escape, phrase.split())) for phrase in sorted(COMMANDS, key=len, reverse=True))
_COMMAND = re.compile(r"(?<![\w'’-])(?:" + "|".join(_PHRASES) + r")(?![\w'’-])", re.IGNORECASE)
_MODEL_PUNCTUATION = string.whitespace + ",.;:!?…"
_SENTENCE_ENDS = ".?!…"
_SENTENCE_END_IN_TEXT = re.compile(r"[.?!…][\"'’”)\]]*(?=\s)")
_ENDS_A_SENTENCE = re.compile(r"(?:\A|\n|[.?!…][\"'’”)\]]*)\Z")


def apply_spoken_commands(text: str) -> str:
    """``text`` with its spoken commands carried out (the module's docstring lists them)."""
    pieces: list[str | Mark] = []  # the model's words, stripped, and the marks commands write between them
    invented_end = False  # a sentence end the model put after a command, dropped, before the next words
    position = 0
    for match in _COMMAND.finditer(text):
        invented_end = _add_words(pieces, text[position:match.start()], position > 0, True, invented_end)
        command = COMMANDS[" ".join(re.split(_BETWEEN_WORDS, match.group().lower()))]
        if command == SCRATCH:
            _scratch(pieces)
        else:
            pieces.append(command)
        position = match.end()
    _add_words(pieces, text[position:], position > 0, False, invented_end)
    return _join(pieces)


def _add_words(pieces: list, words: str, after_command: bool, before_command: bool, invented_end: bool) -> bool:
    """Append the model's ``words`` without the punctuation it put next to a command, their first word
    capitalised or lowercased as the command before them asks; returns whether a dropped sentence end
    still waits for words."""
    if after_command:
        stripped = words.lstrip(_MODEL_PUNCTUATION)
        invented_end = invented_end or any(c in _SENTENCE_ENDS for c in words[:len(words) - len(stripped)])
        words = stripped
    if before_command:
        words = words.rstrip(_MODEL_PUNCTUATION)
    words = words.strip()
    if not words:
        return invented_end
    if after_command:
        if _starts_sentence(pieces):
            words = capitalise_first(words)
        elif invented_end:
            words = lowercase_first(words)
    pieces.append(words)
    return False


def _starts_sentence(pieces: list) -> bool:
    """Whether words appended to ``pieces`` start a sentence."""
    for piece in reversed(pieces):
        if isinstance(piece, str):
            return _ENDS_A_SENTENCE.search(piece) is not None
        if piece.then != KEEP:
            return piece.then == CAPITAL
    return True


def _scratch(pieces: list) -> None:
    """Drop the last sentence of ``pieces``: the marks at its end, then everything back to the sentence
    end or line break before it."""
    while pieces and isinstance(pieces[-1], Mark):
        pieces.pop()
    while pieces:
        last = pieces[-1]
        if isinstance(last, Mark):
            if last.then == CAPITAL:
                return
            pieces.pop()
            continue
        ends = list(_SENTENCE_END_IN_TEXT.finditer(last))
        if ends:
            pieces[-1] = last[:ends[-1].end()]
            return
        pieces.pop()


def _join(pieces: list) -> str:
    """The text of ``pieces``, with a space between two of them where both allow it."""
    out: list[str] = []
    space_after = False
    for piece in pieces:
        mark = WORDS if isinstance(piece, str) else piece
        if out and space_after and mark.space_before:
            out.append(" ")
        out.append(piece if isinstance(piece, str) else piece.text)
        space_after = mark.space_after
    return "".join(out)


# Hesitations, however many letters the model gives them ("umm", "hmmm"), in lowercase or capitalised;
# never part of a longer or hyphenated word ("umbrella", "uh-huh"), in capitals ("the ER") or after a
# number ("5 mm").
_FILLER = re.compile(
    r"(?P<lead>,\s*)?(?<![\w'’-])(?<!\d\s)"
    r"(?P<word>[Uu]m+|[Uu]hm+|[Uu]h+|[Ee]rm+|[Ee]r+|[Aa]h+|[Hh]m+|[Mm]m+)(?![\w'’-])(?P<trail>[,.?!…]*)"
)


def remove_fillers(text: str) -> str:
    """``text`` without hesitation fillers (um, uh, uhm, erm, er, ah, hmm, mm) and the commas around them.

    A filler inside a sentence keeps the sentence's end ("so, um." -> "so."); a filler that opens one
    goes with the punctuation after it, and gives its capital to the word that now opens the sentence
    ("Um, so we go" -> "So we go").
    """
    position = 0
    while (match := _FILLER.search(text, position)) is not None:
        before, after = text[:match.start()], text[match.end():]
        if _ENDS_A_SENTENCE.search(before.rstrip(" ")):
            kept = ""
            if starts_capitalised(match.group("word")):
                after = capitalise_first(after.lstrip(" "))
        else:
            kept = match.group("trail").replace(",", "")
        head = before.rstrip(" ") + kept
        text = _glue(head, after)
        position = len(head)
    return text


def _glue(left: str, right: str) -> str:
    """``left`` and ``right`` with one space between them, none where either is empty, ``left`` ends a
    line or ``right`` starts with punctuation that follows a word."""
    left, right = left.rstrip(" "), right.lstrip(" ")
    if not left or not right or left.endswith("\n") or right[0] in ",.;:!?…)\n":
        return left + right
    return f"{left} {right}"
