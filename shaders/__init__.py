"""The WGSL kernels, package data of ``sayso`` (read by ``sayso.engine.gpu.kernels``)."""
