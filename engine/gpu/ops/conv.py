"""(being written)"""

from engine.gpu.ops.base import GpuOpsBase


class ConvOps(GpuOpsBase):
    pass
