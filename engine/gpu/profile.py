"""GPU time per kernel, for finding where a transcription's GPU time goes (``sayso bench --kernels``).

WebGPU lets a timestamp be written only where a compute pass begins or ends, so while a
``DispatchTimer`` is installed the ``DispatchRecorder`` gives every dispatch a pass of its own, with its two
timestamps, and after every submission the timer reads them back and adds each dispatch's time to
its kernel (the pipeline's label: shader file, entry point, override constants). That is slower than
a normal run, and the GPU's idle gaps between passes are not counted: the sum of the kernels' times
is the GPU's busy time, and a normal run's wall time minus it is what the host adds (Python, the
driver, waiting for read-backs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.gpu.device import Device

CAPACITY = 2048  # dispatches per submission while timing: two timestamps each, a query set holds 4096


@dataclass
class KernelTime:
    """What one kernel took over the timed work: its dispatches and their summed GPU time."""

    calls: int = 0
    ns: int = 0


class DispatchTimer:
    """Timestamps around each dispatch of the submissions recorded while it is installed."""

    def __init__(self, device: Device) -> None:
        if "timestamp-query" not in device.features:
            raise GpuError(f"{device.info['device']} can't time kernels: its adapter has no timestamp-query.")
        self.device = device
        self.query_set = device.device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * CAPACITY)
        self.resolved = device.buffer(16 * CAPACITY, wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC,
                                      "timestamps")  # fmt: skip
        self.labels: list[str] = []  # of the dispatches recorded since the last submission, in order
        self.kernels: dict[str, KernelTime] = {}

    def begin_pass(self, encoder: wgpu.GPUCommandEncoder, label: str) -> wgpu.GPUComputePassEncoder:
        """A compute pass for the next dispatch, timestamped where it begins and ends."""
        i = len(self.labels)
        self.labels.append(label)
        writes = {"query_set": self.query_set, "beginning_of_pass_write_index": 2 * i,
                  "end_of_pass_write_index": 2 * i + 1}  # fmt: skip
        return encoder.begin_compute_pass(timestamp_writes=writes)

    def resolve(self, encoder: wgpu.GPUCommandEncoder) -> None:
        """Record, at the end of a submission, the copy of its timestamps into ``resolved``."""
        if self.labels:
            encoder.resolve_query_set(self.query_set, 0, 2 * len(self.labels), self.resolved, 0)

    def collect(self) -> None:
        """Once the submission is sent: read its timestamps and add each dispatch's time to its kernel."""
        if not self.labels:
            return
        data = self.device.queue.read_buffer(self.resolved, 0, 16 * len(self.labels))
        stamps = np.frombuffer(data, np.uint64).reshape(-1, 2).astype(np.int64)
        for label, (begin, end) in zip(self.labels, stamps, strict=True):
            kernel = self.kernels.setdefault(label, KernelTime())
            kernel.calls += 1
            kernel.ns += max(0, int(end - begin))  # a driver may report a pass it merged as 0
        self.labels.clear()

    @property
    def busy_ms(self) -> float:
        """The summed GPU time of every timed dispatch."""
        return sum(k.ns for k in self.kernels.values()) / 1e6

    def table(self) -> str:
        """The kernels by GPU time, most first: calls, total ms, mean µs, share of the busy time."""
        busy = max(self.busy_ms, 1e-9)
        width = max(map(len, self.kernels), default=6) + 2
        rows = [f"{'kernel':<{width}}{'calls':>8}{'total ms':>11}{'mean us':>10}{'share':>8}"]
        for label, k in sorted(self.kernels.items(), key=lambda item: -item[1].ns):
            rows.append(f"{label:<{width}}{k.calls:>8}{k.ns / 1e6:>11.2f}{k.ns / 1e3 / k.calls:>10.1f}"
                        f"{100 * k.ns / 1e6 / busy:>7.1f}%")  # fmt: skip
        return "\n".join(rows)
