"""What a Whisper checkpoint reader hands the GGUF layout, whatever format it read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

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

