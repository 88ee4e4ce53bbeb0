"""Convolutions on the GPU (``shaders/conv.wgsl``).

A full conv1d (Whisper's stem, Moonshine's stem) is ``gemm(im2col(x), w)``: the unfold is cheap and
the GEMM kernel does the arithmetic at GEMM speed. A depthwise conv (the Conformer conv module) has
only k taps per channel, so it is computed directly. Parakeet's 2-D subsampling is the same in 2-D,
3x3 at stride 2: ``im2col_3x3_s2`` before a GEMM, ``depthwise_3x3_s2`` directly, and
``channels_major`` to flatten the result for its projection.
"""

from __future__ import annotations

from sayso.engine.gpu.entry_points import CHANNELS_MAJOR, DEPTHWISE_3X3_S2, DEPTHWISE_CONV, IM2COL, IM2COL_3X3_S2
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuTensor

THREADS = 256  # workgroup size of the conv kernels (WG in conv.wgsl)


def _elements(n: int) -> tuple[int, int, int]:
    """The dispatch grid of a one-thread-per-output kernel over ``n`` outputs."""
    return grid(-(-n // THREADS))


class ConvOps(GpuOpsBase):
    """im2col for GEMM-based conv1d, depthwise conv1d, and their 3x3 stride-2 conv2d counterparts."""

    def im2col(self, x: GpuTensor, kernel: int, stride: int, pad: int, batch: int = 1) -> GpuTensor:
        """x: [T, C] -> [T_out, C*kernel], column ``c*kernel + j`` = ``x[t*stride + j - pad, c]`` (zero
        outside), T_out = (T + 2*pad - kernel) // stride + 1: the rows a conv weight [C_out, C, kernel]
        flattened to [C_out, C*kernel] multiplies. With ``batch``, x is that many sequences of T/batch
        rows, each unfolded on its own into its T_out rows: one GEMM then convolves every window."""
        rows, c = x.shape
        if kernel <= 0 or stride <= 0 or pad < 0 or batch <= 0 or rows % batch:
            raise ValueError(f"im2col: kernel {kernel} and stride {stride} must be positive, pad {pad} not negative, "
                             f"and {rows} rows {batch} sequences of equal length")
        t = rows // batch
        t_out = max(0, (t + 2 * pad - kernel) // stride + 1)
        out = self.empty((batch * t_out, c * kernel))
        self.run(IM2COL, [x, out], [t, c, kernel, stride, pad, t_out, batch], _elements(out.size))
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

    def im2col_3x3_s2(self, x: GpuTensor, height: int, width: int) -> GpuTensor:
        """x: [H*W, C] -> [H'*W', C*9] (see ``engine.ops.Ops.im2col_3x3_s2``)."""
        c, h_out, w_out = _image(x, height, width, "im2col_3x3_s2")
        out = self.empty((h_out * w_out, c * 9))
        self.run(IM2COL_3X3_S2, [x, out], [height, width, c, h_out, w_out, 1.0], _elements(out.size))
        return out

    def depthwise_3x3_s2(self, x: GpuTensor, height: int, width: int, w: GpuTensor, b: GpuTensor) -> GpuTensor:
        """x: [H*W, C], w: [C, 9], b: [C] -> [H'*W', C] (see ``engine.ops.Ops.depthwise_3x3_s2``)."""
        c, h_out, w_out = _image(x, height, width, "depthwise_3x3_s2")
        if w.shape != (c, 9) or b.shape != (c,):
            raise ValueError(f"depthwise_3x3_s2: weight {w.shape} and bias {b.shape} don't fit {c} channels")
        out = self.empty((h_out * w_out, c))
        self.run(DEPTHWISE_3X3_S2, [x, w, b, out], [height, width, c, h_out, w_out, 1.0], _elements(out.size))
        return out

    def channels_major(self, x: GpuTensor, height: int, width: int, scale: float = 1.0) -> GpuTensor:
        """x: [H*W, C] -> [H, C*W] (see ``engine.ops.Ops.channels_major``)."""
        c, _, _ = _image(x, height, width, "channels_major")
        out = self.empty((height, c * width))
        self.run(CHANNELS_MAJOR, [x, out], [height, width, c, 0, 0, float(scale)], _elements(out.size))
        return out


def _image(x: GpuTensor, height: int, width: int, what: str) -> tuple[int, int, int]:
    """An image's channels and its size after a 3x3 conv at stride 2 with padding 1."""
    if len(x.shape) != 2 or x.shape[0] != height * width:
        raise ValueError(f"{what}: {x.shape} is not an image of {height} x {width} pixels")
    return x.shape[1], (height - 1) // 2 + 1, (width - 1) // 2 + 1
