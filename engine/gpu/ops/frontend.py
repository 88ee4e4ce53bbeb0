"""Frontends' own kernels on the GPU (``shaders/frontend.wgsl``): what is left of a family's features
once the products that make them (``gemm``) have run."""

from __future__ import annotations

from sayso.engine.gpu.entry_points import WHISPER_LOG_MEL
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.tensors import GpuTensor


class FrontendOps(GpuOpsBase):
    """Whisper's log-mel normalisation."""

    features_on_backend = True

    def whisper_log_mel(self, mel: GpuTensor, frames: int) -> GpuTensor:
        """mel [rows <= frames, n_mels] -> [frames, n_mels] (see ``engine.ops.WhisperOps.whisper_log_mel``).
        One workgroup: the clamp depends on the maximum of the whole window (frontend.wgsl says why)."""
        rows, cols = mel.shape
        if rows > frames:
            raise ValueError(f"whisper_log_mel: {rows} rows of mel power for a window of {frames} frames")
        out = self.empty((frames, cols))
        self.run(WHISPER_LOG_MEL, [mel, out], [rows, frames, cols], (1, 1, 1))
        return out
