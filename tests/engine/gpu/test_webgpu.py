"""The choice of WebGPU implementation (``engine.gpu.webgpu``): wgpu-native or Dawn, made once a process,
so each case runs in a process of its own, with the environment it names.

Debian 12's lavapipe (Mesa 22.3) is a driver Dawn refuses; Mesa 25's lavapipe, which
``packaging/lavapipe_dawn.sh`` unpacks into ``.cache/mesa25``, is one it runs on, without subgroup
matrices. The cases on Mesa 25 run where the session itself runs on Dawn (CI's Dawn run), in its
environment, or where that folder is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import cli_env
from support.data import AUDIO, ROOT, TINY_EN_GGUF
from sayso.engine.gpu import webgpu

pytestmark = pytest.mark.gpu

SYSTEM_LAVAPIPE = sorted(Path("/usr/share/vulkan/icd.d").glob("lvp_icd*.json"))
"""Debian's own lavapipe (mesa-vulkan-drivers), which packaging/setup.sh installs."""
MESA25 = ROOT / ".cache" / "mesa25"
DRIVER_VARIABLES = ("VK_DRIVER_FILES", "VK_ICD_FILENAMES", "LD_LIBRARY_PATH", webgpu.ENV)

DESCRIBE = "from sayso.engine.gpu import Device; print(Device().describe())"

# Two enables after a declaration, one naming subgroups: what a module joined from several files of
# shaders/ can hold. Only hoisted can naga or Tint take it.
JOINED_WGSL = """
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
enable f16, subgroups;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) { out[lid] = subgroupAdd(f32(lid)) + f32(f16(0.5)); }
"""
COMPILE = f"""
import json
from sayso.engine.gpu import Device, webgpu
device = Device().opened()
source = webgpu.wgsl_source({JOINED_WGSL!r})
device.device.create_shader_module(code=source)
print(json.dumps(source))
"""


def environment(tmp_path, webgpu_value: str, driver: dict[str, str]) -> dict[str, str]:
    """The session's environment with its driver variables replaced by ``driver``."""
    env = {k: v for k, v in cli_env(tmp_path).items() if k not in DRIVER_VARIABLES}
    return {**env, webgpu.ENV: webgpu_value, **driver}


def system_lavapipe() -> dict[str, str]:
    assert SYSTEM_LAVAPIPE, "Debian's lavapipe is missing: run packaging/setup.sh"
    return {"VK_DRIVER_FILES": str(SYSTEM_LAVAPIPE[0])}


def mesa25() -> dict[str, str]:
    """The driver variables of Mesa 25's lavapipe: the session's own where it runs on Dawn, else those of
    ``.cache/mesa25``; a test is skipped without either (CI's Dawn run always has the first)."""
    if webgpu.is_dawn():
        return {name: os.environ[name] for name in DRIVER_VARIABLES[:-1] if name in os.environ}
    icd = MESA25 / "lvp.json"
    if not icd.is_file():
        pytest.skip("needs a driver Dawn runs on: run under SAYSO_WEBGPU=dawn, or bash packaging/lavapipe_dawn.sh")
    library = Path(json.loads(icd.read_text())["ICD"]["library_path"])
    return {"VK_DRIVER_FILES": str(icd), "LD_LIBRARY_PATH": str(library.parent)}


def python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def output(code: str, env: dict[str, str]) -> str:
    done = python(code, env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def one_line_error(args: list[str], env: dict[str, str]) -> str:
    """The one ``sayso:`` line of a failed ``sayso ARGS`` (no traceback), which is returned."""
    done = subprocess.run([sys.executable, "-m", "sayso", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("sayso: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def transcribe_on_gpu(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sayso", "transcribe", str(AUDIO / "jfk.wav"), "--model",
                             str(TINY_EN_GGUF), "--device", "gpu", "--format", "json"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_wgpu_names_wgpu_native_and_leaves_dawn_unloaded(tmp_path):
    described = output(DESCRIBE + "; import sys; print('wgpudawn' in sys.modules)",
                       environment(tmp_path, "wgpu", system_lavapipe()))
    assert described.startswith("wgpu-native Vulkan | llvmpipe")
    assert "| chosen: SAYSO_WEBGPU=wgpu" in described
    assert described.endswith("\nFalse")


def test_a_value_that_names_no_implementation_is_one_error_line(tmp_path):
    error = one_line_error(["transcribe", str(AUDIO / "jfk.wav"), "--device", "gpu"],
                           environment(tmp_path, "metal", system_lavapipe()))
    assert error == "sayso: SAYSO_WEBGPU='metal' is not one of auto, wgpu, dawn. Unset it to let Sayso choose."


def test_dawn_on_debians_lavapipe_is_refused_saying_why(tmp_path):
    error = one_line_error(["transcribe", str(AUDIO / "jfk.wav"), "--device", "gpu"],
                           environment(tmp_path, "dawn", system_lavapipe()))
    assert error.startswith("sayso: SAYSO_WEBGPU=dawn, but Dawn failed: no Dawn adapter: "), error
    assert "Vulkan" in error and "Unset SAYSO_WEBGPU: wgpu-native runs where Dawn can't" in error, error


def test_auto_on_debians_lavapipe_takes_wgpu_native_saying_why(tmp_path):
    described = output(DESCRIBE, environment(tmp_path, "auto", system_lavapipe()))
    assert described.startswith("wgpu-native Vulkan | llvmpipe")
    assert "| chosen: Dawn failed: no Dawn adapter: " in described


def test_wgsl_source_hoists_the_enables_and_adds_subgroups_on_dawn_only(tmp_path):
    """Each implementation's compiler takes the joined source as ``wgsl_source`` gives it: naga refuses
    ``enable subgroups;``, which Tint requires."""
    on_wgpu = json.loads(output(COMPILE, environment(tmp_path, "wgpu", system_lavapipe())))
    on_dawn = json.loads(output(COMPILE, environment(tmp_path, "dawn", mesa25())))
    assert enables_and_first_declaration(on_wgpu) == (["enable f16;"], "@group(0)")
    assert enables_and_first_declaration(on_dawn) == (["enable f16;", "enable subgroups;"], "@group(0)")


def enables_and_first_declaration(source: str) -> tuple[list[str], str]:
    """A module's ``enable`` lines, and the start of its first line that is none."""
    lines = [line for line in source.splitlines() if line.strip()]
    enables = [line for line in lines if line.startswith("enable")]
    assert lines[: len(enables)] == enables, "an enable after a declaration"
    return enables, lines[len(enables)][: len("@group(0)")]


def test_auto_on_mesa25_takes_wgpu_native_for_lack_of_subgroup_matrices(tmp_path):
    described = output(DESCRIBE, environment(tmp_path, "auto", mesa25()))
    assert described.startswith("wgpu-native Vulkan | llvmpipe")
    assert described.endswith("has no subgroup matrices"), described


def test_dawn_transcribes_jfk_as_wgpu_native_does(tmp_path):
    """Both implementations on the same driver (Mesa 25's lavapipe), side by side: one text, one timing."""
    runs = [transcribe_on_gpu(environment(tmp_path / name, name, mesa25())) for name in ("wgpu", "dawn")]  # at once
    results = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stderr
        results.append(json.loads(stdout))
    wgpu_native, dawn = (reading(result) for result in results)
    print(f"\n{dawn[0]}")
    assert dawn == wgpu_native
    assert "ask not what your country can do for you" in dawn[0]


def reading(result: dict) -> tuple:
    """A transcript's text, and each segment's times, text and tokens (ids and times)."""
    return result["text"], [(s["start"], s["end"], s["text"], [(t["id"], t["start"]) for t in s["tokens"]])
                            for s in result["segments"]]


KERNEL_TIMES = """
import json
import numpy as np
from wgpudawn.backends.dawn import extras
from sayso.engine.gpu import GpuOps
ops = GpuOps()
a = ops.tensor(np.ones((64, 64), np.float32))
timer = ops.recorder.time_kernels()
for _ in range(20):
    out = ops.add(a, a)
ops.read(out)
ops.recorder.stop_timing()
print(json.dumps({"toggles": extras.get_toggles(ops.device.device), "ns": [k.ns for k in timer.kernels.values()]}))
"""


def test_dawn_times_kernels_to_the_nanosecond_without_a_browsers_guards(tmp_path):
    """Dawn's device has its toggles (``webgpu.DAWN_DEVICE_TOGGLES_ON``/``_OFF``): with its default
    timestamp quantization every kernel time was a multiple of 65536 ns, which made ``--kernels``
    tables and ``bench_gemm`` on Dawn round their figures to tens of microseconds."""
    found = json.loads(output(KERNEL_TIMES, environment(tmp_path, "dawn", mesa25())))
    assert set(webgpu.DAWN_DEVICE_TOGGLES_ON) <= set(found["toggles"])
    assert not set(webgpu.DAWN_DEVICE_TOGGLES_OFF) & set(found["toggles"])
    assert found["ns"] and any(ns % 65536 for ns in found["ns"]), found["ns"]
