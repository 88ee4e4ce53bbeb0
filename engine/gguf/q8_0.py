"""GGUF's Q8_0 blocks: every 32 values of a row stored as one float16 scale and 32 int8, 34 bytes.

The reader dequantizes small tensors with these, the numpy backend its embedding rows and dense copies.
"""

from __future__ import annotations

import numpy as np

Q8_0_BLOCK = 32  # values per block
Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK  # the float16 scale, then the int8 values


def q8_0_scales(blocks: np.ndarray) -> np.ndarray:
    """The float32 scales [..., K/32, 1] of blocks [..., K/32, 34]."""
    return blocks[..., :2].copy().view(np.float16).astype(np.float32)


def q8_0_values(blocks: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 values [..., K/32, 32] of blocks [..., K/32, 34]: int8 times scale, exact in float32."""
    return np.multiply(blocks[..., 2:].view(np.int8), q8_0_scales(blocks), out=out)
