"""(being written)"""

from engine.gpu.ops.base import GpuOpsBase


class NormOps(GpuOpsBase):
    pass
