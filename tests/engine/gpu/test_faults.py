"""GPU faults, made for real: no adapter, no Vulkan driver, a device lost in the middle of a transcription,
a buffer beyond what the GPU can hold. The engine raises one GpuError that says what happened, or, by
its fallback rule (``engine.backend.Fallback``: ``auto``, or someone listening, as the app's engine
thread does), reloads the model on the CPU and transcribes the same recording there.

Lavapipe (software Vulkan) is the GPU here: a whole transcription on it takes about a minute, so every
fault strikes before or early in the model's work.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from sayso.app.core.engine_worker import EngineClient  # noqa: E402
from support.data import AUDIO, TINY_EN_GGUF  # noqa: E402
from support.gpu import wgpu_native_only  # noqa: E402
from support.qt import wait_for  # noqa: E402
from support.texts import JFK_WORDS, words  # noqa: E402
from sayso.engine.audio import load_audio  # noqa: E402
from sayso.engine.backend import Fallback, make_ops  # noqa: E402
from sayso.engine.engine import Engine  # noqa: E402
from sayso.engine.errors import DeviceOpenError, GpuError  # noqa: E402
from sayso.engine.gpu.device import ADAPTER_ENV  # noqa: E402

pytestmark = pytest.mark.gpu

LOST = re.compile(r"GPU device .* was lost while .*--device cpu", re.S)


@pytest.fixture(scope="module")
def jfk():
    return load_audio(AUDIO / "jfk.wav")


# ---- no adapter ---------------------------------------------------------------------------------


def test_an_adapter_name_that_matches_nothing(monkeypatch):
    monkeypatch.setenv(ADAPTER_ENV, "no-such-gpu-9000")
    with pytest.raises(GpuError) as info:
        make_ops("gpu")
    message = str(info.value)
    assert "'no-such-gpu-9000' matches no adapter" in message and "available: 0: " in message and "Unset it" in message
    assert make_ops("auto").name == "cpu"  # auto says why in the log and runs on numpy


def test_a_device_that_will_not_open(monkeypatch):
    """The adapter is there but wgpu refuses its device (asked for buffers 4x larger than the adapter
    allows). The device opens while the model loads (``engine.gpu.Device``), so the load is where
    this surfaces: ``--device gpu`` fails it saying so; ``auto``, on an adapter taken for a real GPU,
    loads the model on numpy instead."""
    import wgpu

    from sayso.engine.gpu.device import Device

    offered = wgpu.GPUAdapter.limits.fget
    monkeypatch.setattr(wgpu.GPUAdapter, "limits",
                        property(lambda adapter: {**offered(adapter), "max-buffer-size": 4 * offered(adapter)["max-buffer-size"]}))  # fmt: skip
    with pytest.raises(DeviceOpenError, match="Could not open the GPU device .*(max_buffer_size|maxBufferSize)"):
        Engine(TINY_EN_GGUF, device="gpu", vad=False)
    monkeypatch.setattr(Device, "is_cpu", property(lambda device: False))  # lavapipe as if it were one
    assert Engine(TINY_EN_GGUF, device="auto", vad=False).ops.name == "cpu"


PROBE = """
import json, wgpu
from sayso.engine.backend import make_ops
from sayso.engine.errors import GpuError
found = {"adapters": [f"{a.info['backend_type']}: {a.info['device']}" for a in wgpu.gpu.enumerate_adapters_sync()]}
found["auto"] = make_ops("auto").describe()
try:
    found["gpu"] = make_ops("gpu").describe()
except GpuError as error:
    found["gpu"] = "GpuError: " + str(error)
print(json.dumps(found))
"""


def probe(**env: str) -> dict:
    """What wgpu offers and what each --device choice gives, in a fresh process with ``env``."""
    result = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@wgpu_native_only
def test_without_a_vulkan_driver():
    """The Vulkan loader pointed at a driver file that isn't there: wgpu quietly offers OpenGL instead
    (Mesa's llvmpipe here), which ``auto`` passes over for numpy; asked for Vulkan only, wgpu finds no
    adapter at all and ``--device gpu`` fails saying what to install."""
    no_driver = {"VK_ICD_FILENAMES": "/nonexistent/icd.json", "VK_DRIVER_FILES": "/nonexistent/icd.json"}
    found = probe(**no_driver)
    print(f"\nno Vulkan driver: {found}")
    assert found["adapters"] and not any(a.startswith("Vulkan") for a in found["adapters"])
    assert found["auto"].startswith("numpy")
    assert found["gpu"].startswith("wgpu-native OpenGL") or found["gpu"].startswith("GpuError")

    vulkan_only = probe(**no_driver, WGPU_BACKEND_TYPE="Vulkan")
    print(f"no Vulkan driver, Vulkan only: {vulkan_only}")
    assert vulkan_only["auto"].startswith("numpy")
    assert vulkan_only["gpu"].startswith("GpuError: No GPU adapter found")
    assert "Install a Vulkan driver" in vulkan_only["gpu"] and "--device cpu" in vulkan_only["gpu"]


# ---- device lost --------------------------------------------------------------------------------


@pytest.fixture
def gpu_engine():
    engine = Engine(TINY_EN_GGUF, device="gpu")
    yield engine
    engine.close()


def test_device_lost_between_two_pieces(gpu_engine, jfk):
    """Speech, 30 s of silence, speech: the device is destroyed when the first window is done (the progress
    callback), and the second window, the second speech, fails with a GpuError that says the device was
    lost."""
    audio = np.concatenate([jfk, np.zeros(30 * 16000, np.float32), jfk])
    seen = []

    def lose_device(fraction: float) -> None:
        if not seen:
            gpu_engine.ops.device.device.destroy()
        seen.append(fraction)

    with pytest.raises(GpuError) as info:
        gpu_engine.transcribe(audio, progress=lose_device)
    assert len(seen) == 1 and seen[0] < 1.0  # lost after the first piece, before the second finished
    assert LOST.search(str(info.value)), info.value


def test_device_lost_while_the_model_runs(gpu_engine, gpu_ops, jfk):
    """Another thread destroys the device one second into the encoder's work: the transcription ends
    with a GpuError within the time it would have taken anyway, not a hang nor a wgpu exception.
    Another device in the same process (``gpu_ops``) is told of that loss too, since wgpu-py logs it
    without naming the device, and must go on working."""
    destroyer = threading.Timer(1.0, gpu_engine.ops.device.device.destroy)
    outcome: list = []

    def transcribe() -> None:
        try:
            outcome.append(gpu_engine.transcribe(jfk))
        except Exception as error:  # noqa: BLE001 - the test looks at whatever came out
            outcome.append(error)

    worker = threading.Thread(target=transcribe, daemon=True)
    started = time.monotonic()
    worker.start()
    destroyer.start()
    worker.join(timeout=180)
    ended = time.monotonic() - started
    print(f"\ndevice destroyed after 1 s; the transcription ended {ended:.1f} s in with {outcome!r}")
    assert not worker.is_alive(), "the transcription hung after the device was lost"
    assert isinstance(outcome[0], GpuError) and LOST.search(str(outcome[0])), outcome
    assert gpu_ops.read(gpu_ops.tensor(np.ones(4, np.float32))).tolist() == [1, 1, 1, 1]


# ---- out of memory ------------------------------------------------------------------------------


def test_a_buffer_beyond_what_the_gpu_can_hold(gpu_ops):
    limit = gpu_ops.device.limits["max-buffer-size"]
    refusal = r"MiB buffer \(too-big\) exceeds the adapter's limit of \d+ MiB. Use a smaller model"
    with pytest.raises(GpuError, match=refusal):
        gpu_ops.device.buffer(limit + 1, label="too-big")
    activations = np.zeros(limit // 4 + 1024, np.float32)  # calloc'd: no page is touched on the host
    with pytest.raises(GpuError, match="exceeds the adapter's limit"):
        gpu_ops.tensor(activations)
    assert gpu_ops.read(gpu_ops.tensor(np.ones(4, np.float32))).tolist() == [1, 1, 1, 1]  # the device still works


def test_a_dictation_goes_on_on_the_cpu_when_the_gpu_is_lost(jfk):
    """The device is lost halfway through a take: the pass that meets it runs again on the CPU, later
    passes run there, and the take's text is whole; the listener is told once."""
    told = []
    engine = Engine(TINY_EN_GGUF, fallback=Fallback("gpu", told.append), vad=False)
    try:
        session = engine.stream(background=False)
        half = len(jfk) // 2
        session.feed(jfk[:half])
        engine.ops.device.device.destroy()
        session.feed(jfk[half:])
        transcript = session.finish()
        assert words(transcript.text) == JFK_WORDS
        assert engine.describe().startswith("whisper-tiny.en on numpy") and engine.backend_serial == 1
        assert len(told) == 1 and LOST.search(told[0]) and "now transcribes on the CPU" in told[0]
        print(f"\nthe listener is told: {told[0]}")
    finally:
        engine.close()


def test_without_a_listener_gpu_means_the_gpu_only(jfk):
    """``--device gpu`` (no one listening for a move): a lost device is an error, not a silent move."""
    engine = Engine(TINY_EN_GGUF, device="gpu", vad=False)
    try:
        engine.ops.device.device.destroy()
        with pytest.raises(GpuError, match=LOST):
            engine.transcribe(jfk[: 2 * 16000])
        assert engine.ops.name == "gpu"
    finally:
        engine.close()


# ---- the app falls back to the CPU --------------------------------------------------------------


class Events:
    def __init__(self, client: EngineClient):
        self.log: list[tuple[str, tuple]] = []
        for name in ("loaded", "warning"):
            getattr(client, name).connect(lambda *args, n=name: self.log.append((n, args)))

    def of(self, name: str) -> list[tuple]:
        return [args for n, args in self.log if n == name]


def test_app_transcribes_on_the_cpu_when_the_gpu_is_lost(qapp, jfk):
    client = EngineClient()
    try:
        client.load(str(TINY_EN_GGUF), "gpu")
        _, description = wait_for(client.loaded)
        assert description.startswith("whisper-tiny.en on wgpu")
        events = Events(client)
        client._worker._engine.ops.device.device.destroy()  # a driver reset while Sayso waits for a dictation
        job = client.submit_pcm(jfk)
        (transcript,) = wait_for(job.finished)  # finished: it did not fail
        assert words(transcript.text) == JFK_WORDS
        (warning,) = events.of("warning")
        print(f"\nthe user is told: {warning[0]}")
        assert LOST.search(warning[0]) and "now transcribes on the CPU" in warning[0]
        assert events.of("loaded")[-1][1].startswith("whisper-tiny.en on numpy")
        assert client.description.startswith("whisper-tiny.en on numpy")

        second = client.submit_pcm(jfk[: 4 * 16000])  # the session stays on the CPU: no second warning
        wait_for(second.finished)
        assert len(events.of("warning")) == 1
    finally:
        client.shutdown()


def test_app_loads_on_the_cpu_when_there_is_no_gpu(qapp, monkeypatch, jfk):
    monkeypatch.setenv(ADAPTER_ENV, "no-such-gpu-9000")
    client = EngineClient()
    try:
        events = Events(client)
        client.load(str(TINY_EN_GGUF), "gpu")
        _, description = wait_for(client.loaded)
        assert description.startswith("whisper-tiny.en on numpy") and client.load_error is None
        (warning,) = events.of("warning")
        assert "matches no adapter" in warning[0] and "now transcribes on the CPU" in warning[0]
        job = client.submit_pcm(jfk)
        (transcript,) = wait_for(job.finished)
        assert words(transcript.text) == JFK_WORDS
    finally:
        client.shutdown()
