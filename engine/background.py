"""Work started on a thread of its own, whose result (or exception) a ``Future`` holds.

The engine starts its slow beginnings this way while the caller goes on: wgpu-native's instance
(``engine.gpu.instance``), the GPU device (``engine.gpu.Device``), Silero's weights (``Engine``).
Standard library only: ``engine.gpu.instance`` runs before anything heavy is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def in_background(work: Callable[[], T], name: str, daemon: bool = True) -> Future[T]:
    """Run ``work`` on a new thread called ``name``. ``daemon``: the process may end while it runs
    (a driver call); otherwise the process waits for it at exit (a download that must not be cut)."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except BaseException as error:  # noqa: BLE001 - whoever waits on ``done`` gets it
            done.set_exception(error)

    threading.Thread(target=run, name=name, daemon=daemon).start()
    return done
