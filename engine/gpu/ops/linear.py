"""(being written)"""

from engine.gpu.ops.base import GpuOpsBase


class LinearOps(GpuOpsBase):
    pass
