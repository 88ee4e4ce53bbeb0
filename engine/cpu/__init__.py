"""The numpy backend (see ``engine/ops.py`` for the contract)."""

from sayso.engine.cpu.ops import NumpyOps

__all__ = ["NumpyOps"]
