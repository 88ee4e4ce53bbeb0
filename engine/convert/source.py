"""What a Whisper checkpoint reader hands the GGUF layout, whatever format it read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sayso.engine.errors import ModelFileError

if TYPE_CHECKING:
    from sayso.engine.convert.tokenizer import Vocabulary


@dataclass
class WhisperSource:
    """A Whisper checkpoint in GGUF terms.

    ``tensors`` maps transcribe.cpp's tensor names (``enc.blocks.0.attn.q.weight``...) to float16
    or float32 arrays in PyTorch layout (linear [out, in], conv [out, in, kernel]); the frontend
    tensors are not among them (they are computed). ``path`` is where it was read from (for errors).
    """

    path: Path
    tensors: dict[str, np.ndarray]
    encoder_heads: int
    decoder_heads: int
    activation: str
    scale_embedding: bool
    vocabulary: Vocabulary
    suppress_tokens: list[int]
    begin_suppress_tokens: list[int]


def load_json(path: Path) -> dict:
    """A checkpoint's JSON file; a ModelFileError naming it when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(path, f"can't be read as JSON ({e})") from None
