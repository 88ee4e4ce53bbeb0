"""The fast kernel tier: which fast versions of entry points (``entry_points.FAST_VERSIONS``) this
device runs, decided once, before anything is recorded (a backend's recorder is made).

A fast version replaces its portable entry point only where ``SAYSO_FAST`` doesn't turn it off (``0``: every
one; ``-gemm_matrix,-...``: those entry points, to measure a model with and without them), the device
has every feature it needs, and a probe dispatch of each of its pipelines (one per workgroup size it
runs with: the layout depends on the size, not on the other constants, whose defaults are probed)
succeeds and reports the subgroup layout the kernel is written for: every invocation in a subgroup
of one size, a power of two from 4 (or the kernel's ``min_subgroup``) to 32, and invocation ``lid``
its lane ``lid % size``. Vulkan promises none of that for compute, hence the probe. A device error
during the probes turns the whole tier off: the portable kernels run alone.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.gpu.device import tells_of_loss
from sayso.engine.gpu.entry_points import FAST_VERSIONS, EntryPoint
from sayso.engine.gpu.recorder import SMALL_READ

FAST_ENV = "SAYSO_FAST"

log = logging.getLogger(__name__)


class FastTier:
    """``version(entry_point)``: the fast version if it is on, else the entry point itself.
    ``verdicts``: each fast version's name -> ``"on"`` or why it is off."""

    def __init__(self, ops) -> None:
        self.ops = ops
        self.versions: dict[EntryPoint, EntryPoint] = {}
        self.verdicts: dict[str, str] = {}
        self.probed = False

    def version(self, entry_point: EntryPoint) -> EntryPoint:
        """What a dispatch of ``entry_point`` runs: its fast version where that is on and takes the
        same grid."""
        fast = self.versions.get(entry_point)
        return fast if fast is not None and fast.same_grid else entry_point

    def is_on(self, fast: EntryPoint) -> bool:
        """Whether ``fast`` passed its probe (for a fast version on a grid of its own, which its op picks)."""
        self.probe()
        return fast in self.versions.values()

    def probe(self) -> None:
        """Decide, once, which fast versions run."""
        if self.probed:
            return
        self.probed = True
        setting = os.environ.get(FAST_ENV, "").strip()
        if setting == "0":
            self.verdicts = {fast.name: f"off ({FAST_ENV}=0)" for fast in FAST_VERSIONS.values()}
            return
        left_off = {name.strip().removeprefix("-") for name in setting.split(",") if name.strip().startswith("-")}
        try:
            for portable, fast in FAST_VERSIONS.items():
                if fast.entry in left_off:
                    self.verdicts[fast.name] = f"off ({FAST_ENV}={setting})"
                    continue
                missing = [f for f in fast.needs if f not in self.ops.device.features]
                if missing:
                    self.verdicts[fast.name] = f"off (the device has no {', '.join(missing)})"
                    continue
                problem = self._probe_layouts(fast)
                self.verdicts[fast.name] = "on" if problem is None else f"off ({problem})"
                if problem is None:
                    self.versions[portable] = fast
        except (GpuError, wgpu.GPUError) as error:  # the device failed a probe: trust no fast kernel
            self.versions.clear()
            reason = f"off (a device error in the probes: {error})"
            self.verdicts = {fast.name: reason for fast in FAST_VERSIONS.values()}
        log.info("%s", self.describe())  # "fast kernels: ..."

    def _probe_layouts(self, fast: EntryPoint) -> str | None:
        """Why ``fast``'s pipelines can't be trusted, or None: each one's empty problem (all
        parameters 0) writes (subgroup size, lane) per invocation, checked against ``lid``."""
        ops = self.ops
        largest = ops.device.limits["max-compute-invocations-per-workgroup"]
        for threads in [size for size in fast.probe_sizes if size <= largest]:  # the others are never run
            try:
                pipeline = ops.kernels.pipeline(fast.file, fast.entry, **({"WG": threads} if fast.sized_by_wg else {}))
            except GpuError as error:  # this kernel's compiler refuses it: the others may still run
                if tells_of_loss(error):
                    raise
                return f"it does not build: {str(error).splitlines()[0]}"
            out = ops.empty((threads, 2))
            # Every other binding is bound to a buffer of its own: a kernel may write more than one
            # (a choice's state and ids), and a buffer bound twice can't be written in a dispatch.
            tensors = [out if name == fast.probe_output else ops.empty((1,)) for name in fast.bindings]
            buffers = [tensor.buffer for tensor in tensors]  # the tensors kept: the pool hands out none twice
            empty = [0.0 if type_ == "f32" else 0 for _, type_ in fast.params]
            ops.recorder.dispatch(pipeline, fast, buffers, empty, (1, 1, 1))
            seen = self._read_small(out)
            problem = layout_problem(seen[:, 0], seen[:, 1], threads, fast.min_subgroup)
            if problem is not None:
                return f"workgroup of {threads}: {problem}"
        return None

    def _read_small(self, out) -> np.ndarray:
        """``out`` [threads, 2] read back in parts that each go through the recorder's write-mapped
        staging (``SMALL_READ`` with its 16-byte mark): a read through ``MAP_READ`` would bring the
        process a large block of pinned memory for the probes' sake (docs/PERFORMANCE.md: small read-backs)."""
        row_bytes = 2 * out.dtype.itemsize
        step = (SMALL_READ - 16) // row_bytes * row_bytes
        parts = [self.ops.recorder.read(out.buffer, min(step, out.nbytes - start), start)
                 for start in range(0, out.nbytes, step)]
        return np.frombuffer(b"".join(parts), out.dtype).reshape(out.shape)

    def describe(self) -> str:
        """One line: which fast versions are on, and why each other one is off."""
        if not self.verdicts:
            return "fast kernels: not probed yet"
        return "fast kernels: " + "; ".join(f"{name} {verdict}" for name, verdict in self.verdicts.items())


def layout_problem(sizes: np.ndarray, lanes: np.ndarray, threads: int, smallest: int = 4) -> str | None:
    """What is wrong with the subgroup layout a probe saw (``sizes``, ``lanes`` per invocation of a
    workgroup of ``threads``), or None when it is the one a fast kernel written for subgroups of
    ``smallest`` or more assumes."""
    size = int(sizes[0])
    if not np.all(sizes == size):
        return f"subgroups of several sizes ({sorted(set(sizes.astype(int).tolist()))})"
    if size < smallest or size > 32 or size & (size - 1):  # 32: gemv's lanes per output, one subgroup or several
        return f"subgroup size {size} (the kernel takes a power of two from {smallest} to 32)"
    expected = np.arange(threads) % size
    if not np.array_equal(lanes.astype(int), expected):
        first = int(np.argmax(lanes.astype(int) != expected))
        return f"invocation {first} is lane {int(lanes[first])}, not {first % size}"
    return None
