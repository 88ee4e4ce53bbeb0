"""Moonshine's vocabulary, for turning output ids into text.

Moonshine's tokenizer is SentencePiece-style BPE with byte fallback (Llama's kind, not Whisper's GPT-2
byte-level BPE): pieces spell spaces as ``▁`` (``▁the``), bytes that no piece covers come out as
``<0xE2>``-style byte pieces, and ``<s>``, ``</s>``, ``<unk>`` and ``<<ST_n>>`` are control tokens. The
GGUF metadata holds the pieces (``tokenizer.ggml.tokens``) and their kinds (``tokenizer.ggml.token_type``:
1 normal, 2 unknown, 3 control, 6 byte). The model only ever writes text, so only decoding is needed.
"""

from __future__ import annotations

import re

NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
SPACE = "▁"  # U+2581, SentencePiece's visible space
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class Tokenizer:
    """Decode Moonshine token ids to text."""

    def __init__(self, tokens: list[str], token_types: list[int]):
        if len(tokens) != len(token_types):
            raise ValueError(f"{len(tokens)} tokens but {len(token_types)} token types")
        self.tokens = list(tokens)
        self._bytes: dict[int, bytes] = {}  # text-carrying ids -> their bytes; control ids are absent
        for i, (piece, kind) in enumerate(zip(tokens, token_types)):
            if kind == BYTE:
                match = _BYTE_PIECE.fullmatch(piece)
                if match is None:
                    raise ValueError(f"byte token {i} is {piece!r}, not <0xNN>")
                self._bytes[i] = bytes([int(match.group(1), 16)])
            elif kind not in (UNKNOWN, CONTROL):
                self._bytes[i] = piece.replace(SPACE, " ").encode("utf-8")

    @classmethod
    def from_model_file(cls, model_file) -> Tokenizer:
        return cls(model_file.require("tokenizer.ggml.tokens"), model_file.require("tokenizer.ggml.token_type"))

    def is_special(self, token_id: int) -> bool:
        """True for the ids that carry no text (``<s>``, ``</s>``, ``<unk>``, ``<<ST_n>>``)."""
        self._check(token_id)
        return token_id not in self._bytes

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (b'' for control tokens); a byte piece may hold part of a character."""
        self._check(token_id)
        return self._bytes.get(token_id, b"")

    def decode(self, ids) -> str:
        """Text of ``ids``, control tokens left out. The bytes of the whole sequence are decoded at once,
        so a character spelled by several byte pieces comes out whole; the leading space that the first
        word's ``▁`` stands for is dropped, as SentencePiece does."""
        text = b"".join(self.token_bytes(int(i)) for i in ids).decode("utf-8", errors="replace")
        return text.removeprefix(" ")

    def _check(self, token_id: int) -> None:
        if not 0 <= token_id < len(self.tokens):
            raise ValueError(f"token id {token_id} is outside this tokenizer's vocabulary of {len(self.tokens)}")
