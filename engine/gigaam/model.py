"""GigaAM v3 on ``engine.ops``: two stride-2 conv1d subsampling layers (4x, 40 ms frames), Conformer
blocks with rotary attention and LayerNorm conv modules, then an RNN-T or CTC head.

Tensors are transcribe.cpp's (``convert-gigaam.py``): ``enc.pre_encode.conv.{0,2}``,
``enc.blocks.{i}.{norm_ff1, ff1.linear{1,2}, norm_conv, conv.{pointwise1, depthwise, ln, pointwise2},
norm_attn, attn.linear_{q,k,v,out}, norm_ff2, ff2.linear{1,2}, norm_out}`` (every linear and conv
with a bias), then ``pred.*``/``joint.*`` or ``head.ctc.*``.
"""

from __future__ import annotations

from sayso.engine.conformer.attention import RotaryAttention
from sayso.engine.conformer.block import ConformerBlock, conformer_block, conv_module
from sayso.engine.conformer.heads import CtcHead, TransducerHead, load_ctc, load_transducer
from sayso.engine.conformer.model import ConformerModel
from sayso.engine.conformer.search import BackendTransducerHead
from sayso.engine.conformer.subsampling import StridedConv1d
from sayso.engine.conformer.weights import require_shape
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gigaam.config import MAX_SYMBOLS, GigaamConfig
from sayso.engine.ops import Ops


class GigaamModel(ConformerModel):
    """Weights on a backend; ``encode`` maps log-mel [64, T] to encoder states [T/4, d]."""

    def __init__(self, model_file: ModelFile, ops: Ops, config: GigaamConfig):
        self.ops = ops
        self.config = c = config
        require_shape(model_file, "enc.pre_encode.conv.0.weight", (c.d_model, c.n_mels, c.subs_kernel))
        self.subsampling = StridedConv1d.load(model_file, ops, "enc.pre_encode", (0, 2), c.subs_kernel)
        self.blocks = [self._block(model_file, f"enc.blocks.{i}") for i in range(c.n_layers)]
        self.head: TransducerHead | BackendTransducerHead | CtcHead
        if c.head == "ctc":
            require_shape(model_file, "head.ctc.weight", (c.n_classes, c.d_model, 1))
            self.head = load_ctc(model_file, ops)
        else:
            require_shape(model_file, "joint.out.weight", (c.n_classes, model_file.shape("joint.out.weight")[1]))
            self.head = load_transducer(model_file, ops, c.pred_layers, c.joint_activation, c.n_classes - 1,
                                        None, MAX_SYMBOLS)

    def _block(self, model_file: ModelFile, prefix: str) -> ConformerBlock:
        ops, c = self.ops, self.config
        attn = RotaryAttention(model_file, ops, f"{prefix}.attn", c.n_heads, c.rotary_base)
        conv = conv_module(model_file, ops, f"{prefix}.conv", f"{prefix}.norm_conv", "layer_norm")
        return conformer_block(model_file, ops, prefix, attn, conv)
