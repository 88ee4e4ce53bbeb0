"""(being written)"""

from engine.gpu.ops.base import GpuOpsBase


class AttentionOps(GpuOpsBase):
    pass
