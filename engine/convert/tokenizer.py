"""Whisper's byte-level BPE vocabulary as GGUF stores it: every id's token text, its type, the merges.

Both source formats carry a Hugging Face tokenizer: ``tokenizer.json`` (CTranslate2 directories and
transformers checkpoints), or the older ``vocab.json`` + ``merges.txt`` with the added tokens in
``tokenizer_config.json`` / ``added_tokens.json``. Neither lists Whisper's 1501 timestamp tokens
(``<|0.00|>`` .. ``<|30.00|>``, the ids after ``<|notimestamps|>``) in every version, so they are
named here from their definition: id ``notimestamps + 1 + i`` is ``<|{0.02*i:.2f}|>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.errors import ModelFileError

TOKEN_NORMAL = 1
TOKEN_CONTROL = 3
"""llama.cpp's ``tokenizer.ggml.token_type`` codes: added special tokens are CONTROL, the rest NORMAL."""

TIMESTAMP_STEP = 0.02  # seconds per timestamp token
_TIMESTAMP = re.compile(r"<\|\d+\.\d\d\|>")


@dataclass
class Vocabulary:
    """``tokens[i]`` is the text of id i (GPT-2 byte-level characters), ``types[i]`` its token type,
    ``merges`` the BPE merges as ``"a b"`` strings in rank order."""

    tokens: list[str]
    types: list[int]
    merges: list[str]

    def __post_init__(self):
        self._ids = {t: i for i, t in reversed(list(enumerate(self.tokens)))}  # first id wins

    def id(self, content: str) -> int | None:
        """The id of the token whose text is ``content`` (a special token such as ``<|endoftext|>``)."""
        return self._ids.get(content)


def read_vocabulary(model_dir: Path, vocab_size: int) -> Vocabulary:
    """Read the tokenizer files of ``model_dir`` into a vocabulary of exactly ``vocab_size`` ids."""
    tokenizer_json = model_dir / "tokenizer.json"
    if tokenizer_json.is_file():
        data = load_json(tokenizer_json)
        model = data.get("model", {})
        if model.get("type") != "BPE":
            raise ModelFileError(tokenizer_json, f"is a {model.get('type')!r} tokenizer, not Whisper's BPE")
        base = model["vocab"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        added = {int(t["id"]): (t["content"], bool(t.get("special", False))) for t in data.get("added_tokens", [])}
    elif (model_dir / "vocab.json").is_file() and (model_dir / "merges.txt").is_file():
        base = load_json(model_dir / "vocab.json")
        merges = _read_merges(model_dir / "merges.txt")
        added = _added_tokens(model_dir)
    else:
        raise ModelFileError(model_dir, "has no tokenizer (tokenizer.json, or vocab.json and merges.txt)")

    by_id: dict[int, tuple[str, bool]] = {int(i): (t, False) for t, i in base.items()}
    by_id.update(added)
    if max(by_id) >= vocab_size:
        raise ModelFileError(model_dir, f"tokenizer has token id {max(by_id)} but the model has only {vocab_size} ids")
    no_timestamps = next((i for i, (t, _) in by_id.items() if t == "<|notimestamps|>"), None)
    if no_timestamps is None:
        raise ModelFileError(model_dir, "tokenizer has no <|notimestamps|> token; is this a Whisper model?")

    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        if i in by_id:
            text, special = by_id[i]
        elif i > no_timestamps:
            text, special = f"<|{(i - no_timestamps - 1) * TIMESTAMP_STEP:.2f}|>", False
        else:
            raise ModelFileError(model_dir, f"tokenizer has no token for id {i}")
        tokens.append(text)
        types.append(TOKEN_CONTROL if special else TOKEN_NORMAL)
    return Vocabulary(tokens, types, merges)


def _read_merges(path: Path) -> list[str]:
    """merges.txt: an optional ``#version`` line, then one ``a b`` merge per line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#version")]


def _added_tokens(model_dir: Path) -> dict[int, tuple[str, bool]]:
    """Added tokens of a slow-tokenizer checkpoint: ``tokenizer_config.json``'s ``added_tokens_decoder``
    (which says which are special) or else ``added_tokens.json`` (``<|...|>`` tokens but timestamps
    are special)."""
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        decoder = load_json(config).get("added_tokens_decoder")
        if decoder:
            return {int(i): (t["content"], bool(t.get("special", False))) for i, t in decoder.items()}
    added = model_dir / "added_tokens.json"
    if added.is_file():
        return {
            int(i): (t, t.startswith("<|") and t.endswith("|>") and not _TIMESTAMP.fullmatch(t))
            for t, i in load_json(added).items()
        }
    return {}
