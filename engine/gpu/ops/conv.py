"""1-D convolutions on the GPU (``shaders/conv.wgsl``).

A full conv1d (Whisper's stem, Moonshine's stem) is ``gemm(im2col(x), w)``: the unfold is cheap and
the GEMM kernel does the arithmetic at GEMM speed. A depthwise conv (the Conformer conv module) has
only k taps per channel, so it is computed directly.
"""

from __future__ import annotations

from engine.gpu.entry_points import DEPTHWISE_CONV, IM2COL
from engine.gpu.ops.base import GpuOpsBase
from engine.gpu.recorder import grid
from engine.gpu.tensors import GpuTensor

THREADS = 256  # workgroup size of the conv kernels (WG in conv.wgsl)


def _elements(n: int) -> tuple[int, int, int]:
    """The dispatch grid of a one-thread-per-output kernel over ``n`` outputs."""
    return grid(-(-n // THREADS))


class ConvOps(GpuOpsBase):
    """im2col for GEMM-based conv1d, and depthwise conv1d."""

    def im2col(self, x: GpuTensor, kernel: int, stride: int, pad: int) -> GpuTensor:
        """x: [T, C] -> [T_out, C*kernel], column ``c*kernel + j`` = ``x[t*stride + j - pad, c]`` (zero
        outside), T_out = (T + 2*pad - kernel) // stride + 1: the rows a conv weight [C_out, C, kernel]
        flattened to [C_out, C*kernel] multiplies."""
        t, c = x.shape
        if kernel <= 0 or stride <= 0 or pad < 0:
            raise ValueError(f"im2col: kernel {kernel} and stride {stride} must be positive, pad {pad} not negative")
        t_out = max(0, (t + 2 * pad - kernel) // stride + 1)
        out = self.empty((t_out, c * kernel))
        self.run(IM2COL, [x, out], [t, c, kernel, stride, pad, t_out], _elements(t_out * c * kernel))
        return out

    def depthwise_conv(self, x: GpuTensor, w: GpuTensor, b: GpuTensor | None, pad_left: int) -> GpuTensor:
        """x: [T, C], w: [C, k], b: [C] or None -> [T, C], stride 1:
        ``out[t, c] = b[c] + sum_j w[c, j] * x[t + j - pad_left, c]`` (zero outside).

        ``pad_left`` (k-1)//2 is 'same' padding, k-1 causal. Without b, x is bound in its place and
        an override constant skips the add.
        """
        t, c = x.shape
        if w.shape[0] != c or len(w.shape) != 2:
            raise ValueError(f"depthwise_conv: weight {w.shape} does not match {c} channels (expected [C, k])")
        if pad_left < 0:
            raise ValueError(f"depthwise_conv: pad_left {pad_left} must not be negative")
        k = w.shape[1]
        out = self.empty((t, c))
        self.run(
            DEPTHWISE_CONV,
            [x, w, b if b is not None else x, out],
            [t, c, k, pad_left],
            _elements(t * c),
            HAS_B=b is not None,
        )
        return out
