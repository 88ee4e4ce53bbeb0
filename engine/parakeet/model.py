"""Parakeet (NeMo FastConformer) on ``engine.ops``: 8x depthwise-striding subsampling, Conformer blocks
with relative-position attention and BatchNorm conv modules, then a TDT, RNN-T or CTC head.

Tensors are transcribe.cpp's (``convert-parakeet.py``): ``enc.pre_encode.conv.{0,2,3,5,6}`` and
``.out``, ``enc.blocks.{i}.{norm_ff1, ff1.linear{1,2}, norm_attn, attn.linear_{q,k,v,out,pos},
attn.pos_bias_{u,v}, norm_conv, conv.{pointwise1, depthwise, pointwise2, bn.*}, norm_ff2,
ff2.linear{1,2}, norm_out}`` (linear/conv biases only with ``use_bias``), then ``pred.*``/``joint.*``
or ``head.ctc.*``.
"""

from __future__ import annotations

import math

from sayso.engine.conformer.attention import RelPositionAttention
from sayso.engine.conformer.block import ConformerBlock, conformer_block, conv_module
from sayso.engine.conformer.heads import CtcHead, TransducerHead, load_ctc, load_transducer
from sayso.engine.conformer.model import ConformerModel
from sayso.engine.conformer.search import BackendTransducerHead
from sayso.engine.conformer.subsampling import DepthwiseStridingConv2d
from sayso.engine.conformer.weights import require_shape
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops
from sayso.engine.parakeet.config import ParakeetConfig


class ParakeetModel(ConformerModel):
    """Weights on a backend; ``encode`` maps log-mel [n_mels, T] to encoder states [T/8, d]."""

    def __init__(self, model_file: ModelFile, ops: Ops, config: ParakeetConfig):
        self.ops = ops
        self.config = c = config
        require_shape(model_file, "enc.pre_encode.out.weight",
                      (c.d_model, c.subsampling_channels * _subsampled(c.n_mels)))
        xscale = math.sqrt(c.d_model) if c.xscaling else 1.0
        self.subsampling = DepthwiseStridingConv2d.load(model_file, ops, "enc.pre_encode", xscale)
        self.blocks = [self._block(model_file, f"enc.blocks.{i}") for i in range(c.n_layers)]
        self.head: TransducerHead | BackendTransducerHead | CtcHead
        if c.head == "ctc":
            self.head = load_ctc(model_file, ops)
        else:
            blank = c.pred_vocab - 1
            outputs = c.pred_vocab + (len(c.durations) if c.durations else 0)
            require_shape(model_file, "joint.out.weight", (outputs, c.joint_hidden))
            self.head = load_transducer(model_file, ops, c.pred_layers, c.joint_activation, blank,
                                        list(c.durations) if c.durations else None, c.max_symbols)

    def _block(self, model_file: ModelFile, prefix: str) -> ConformerBlock:
        ops, c = self.ops, self.config
        attn = RelPositionAttention(model_file, ops, f"{prefix}.attn", c.n_heads, c.attention_window)
        conv = conv_module(model_file, ops, f"{prefix}.conv", f"{prefix}.norm_conv", c.conv_norm, c.conv_pad_left)
        return conformer_block(model_file, ops, prefix, attn, conv)


def _subsampled(n: int, times: int = 3) -> int:
    """Length after ``times`` stride-2, kernel-3, padding-1 convolutions."""
    for _ in range(times):
        n = (n - 1) // 2 + 1
    return n
