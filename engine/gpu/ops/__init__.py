"""The GPU backend: ``GpuOps`` implements ``engine.ops.Backend`` (``Ops`` and ``WhisperOps``) with WGSL kernels.

Each group of kernels is a mixin in its own module, next to its WGSL file in ``shaders/``:
``linear`` (GEMM, GEMV, add, embedding), ``norm`` (LayerNorm, GroupNorm, softmax, GLU,
SwiGLU, rotary), ``conv`` (im2col, depthwise conv), ``attention`` (flash attention, KV cache),
``transducer`` (a transducer's greedy search), and ``WhisperOps``'s: ``select`` (Whisper's greedy token
selection), ``frontend`` (Whisper's log-mel normalisation).
"""

from sayso.engine.gpu.ops.attention import AttentionOps
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.ops.conv import ConvOps
from sayso.engine.gpu.ops.frontend import FrontendOps
from sayso.engine.gpu.ops.linear import LinearOps
from sayso.engine.gpu.ops.norm import NormOps
from sayso.engine.gpu.ops.select import SelectOps
from sayso.engine.gpu.ops.transducer import TransducerOps


class GpuOps(LinearOps, NormOps, ConvOps, AttentionOps, SelectOps, TransducerOps, FrontendOps, GpuOpsBase):
    """Every operation of ``engine.ops.Backend`` on one wgpu device."""


__all__ = ["GpuOps"]
