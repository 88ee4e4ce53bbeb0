"""Token ids to text for the Conformer families: SentencePiece pieces (``tokenizer.ggml.model`` "bpe")
and character vocabularies ("char"), read from the model file's ``tokenizer.ggml.*`` keys.

Decoding follows transcribe.cpp's tokenizer: every ``▁`` (U+2581) becomes a space, a byte-fallback
piece ``<0xHH>`` contributes that byte, anything else is copied as it is (a character vocabulary's
pieces are the characters, the space among them).
"""

from __future__ import annotations

import re

from sayso.engine.conformer.emission import Emission
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.transcript import Segment, Token

SP_SPACE = "\u2581"
TOKEN_UNKNOWN, TOKEN_CONTROL = 2, 3  # tokenizer.ggml.token_type of <unk> and of control pieces (blank, <s>)
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_LANGUAGE_TAG = re.compile(r"<[a-z]{2,3}-[A-Za-z]{2,4}>")  # "<en-US>": multilingual Parakeet's tags


class Vocabulary:
    """The pieces of a model's vocabulary, the blank included (last)."""

    MODELS = ("bpe", "char")

    def __init__(self, pieces: list[str], types: list[int]):
        self.pieces = pieces
        self.types = types

    @classmethod
    def from_model_file(cls, model_file: ModelFile) -> Vocabulary:
        model = str(model_file.require("tokenizer.ggml.model"))
        if model not in cls.MODELS:
            raise ModelFileError(model_file.path, f"has a '{model}' tokenizer, which the Conformer families don't use",
                                 "Expected a SentencePiece ('bpe') or character ('char') vocabulary.")
        pieces = [str(p) for p in model_file.require("tokenizer.ggml.tokens")]
        types = [int(t) for t in model_file.get("tokenizer.ggml.token_type", [1] * len(pieces))]
        return cls(pieces, types)

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (see the module docstring)."""
        out = bytearray()
        for token in ids:
            piece = self.pieces[token]
            byte = _BYTE_PIECE.fullmatch(piece)
            out += bytes([int(byte.group(1), 16)]) if byte else piece.replace(SP_SPACE, " ").encode()
        return out.decode("utf-8", errors="replace")

    def is_special(self, token: int) -> bool:
        """A control piece (blank, <s>), the unknown piece, or a language tag like ``<en-US>``."""
        piece = self.pieces[token]
        return (self.types[token] in (TOKEN_UNKNOWN, TOKEN_CONTROL) or piece == "<unk>"
                or _LANGUAGE_TAG.fullmatch(piece) is not None)


def segment(vocabulary: Vocabulary, emissions: list[Emission], frame_seconds: float, offset: float) -> list[Segment]:
    """The emitted tokens as one segment, as transcribe.cpp reports a Conformer model's run: text
    decoded from all ids with runs of spaces collapsed and the ends trimmed; each token starts at its
    frame (``frame * frame_seconds``, plus ``offset``, the piece's place in the file) and the segment
    spans its first token's start to its last token's end (start + duration frames). No tokens, no
    segment."""
    if not emissions:
        return []
    tokens = [
        Token(e.id, vocabulary.decode([e.id]), offset + e.frame * frame_seconds, e.probability) for e in emissions
    ]
    text = " ".join(vocabulary.decode([e.id for e in emissions]).split())
    last = emissions[-1]
    end = offset + (last.frame + last.duration) * frame_seconds
    return [Segment(tokens[0].start, end, text, tokens)]
