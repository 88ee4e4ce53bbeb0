"""Which WebGPU implementation runs the engine: wgpu-native (wgpu-py) or Google's Dawn (wgpudawn).

Both offer wgpu-py's API, so the rest of the GPU layer imports ``wgpu`` and never asks which it got.
They differ in what they reach: only Dawn enables subgroup matrices (``chromium-experimental-subgroup-
matrix``: the tensor cores, from WGSL), and only wgpu-native runs on older software drivers (Dawn
refuses Mesa 22's lavapipe) and has the C paths of ``engine.gpu.native``.

``choose`` decides once a process, before anything imports ``wgpu``: ``SAYSO_WEBGPU`` names one
(``wgpu`` or ``dawn``), or ``auto`` (the default) takes Dawn where wgpudawn is installed and its adapter
offers the subgroup-matrix configuration our kernels are written for (f16 x f16 -> f32, 16x16x16),
and wgpu-native everywhere else. The choice and its reason are ``Choice``, which
``Device.describe`` and ``sayso doctor`` show.

Dawn is made ``wgpu`` for the process by ``wgpudawn.install_as_wgpu``. Everything this module takes
from Dawn beyond wgpu-py's API (its instance and device toggles, its adapter properties) is here; the one
public-API path is wgpu-native with no Dawn at all (``SAYSO_WEBGPU=wgpu``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass

from sayso.engine.errors import GpuError

log = logging.getLogger(__name__)

ENV = "SAYSO_WEBGPU"
WGPU_NATIVE, DAWN = "wgpu-native", "dawn"
CHOICES = {"auto": None, "wgpu": WGPU_NATIVE, "wgpu-native": WGPU_NATIVE, "dawn": DAWN}

DAWN_TOGGLES = ("allow_unsafe_apis", "vulkan_enable_f16_on_nvidia")
"""Instance toggles: the first lets a device have Dawn's experimental features (subgroup matrices);
without the second Dawn offers NVIDIA's Vulkan drivers no ``shader-f16``, and so no f16 subgroup
matrices."""

DAWN_DEVICE_TOGGLES_ON = ("disable_robustness", "disable_workgroup_init")
"""Device toggles that take out what a browser adds for pages it doesn't trust: bounds clamps on every
array access (our kernels guard their own reads and writes, and the tests read past no buffer) and the
zeroing of workgroup memory as each workgroup starts (our kernels write it before they read it)."""
DAWN_DEVICE_TOGGLES_OFF = ("timestamp_quantization", "enable_spirv_validation")
"""Device toggles that are on by default and cost us: timestamps rounded to tens of microseconds
(``sayso bench --kernels`` times kernels shorter than that), and a validation pass over every
pipeline's SPIR-V, which adds to each build of a model's load."""

SUBGROUP_MATRIX = "chromium-experimental-subgroup-matrix"
MATRIX_CONFIG = {"component_type": "f16", "result_component_type": "f32", "m": 16, "n": 16, "k": 16}
"""The subgroup-matrix shape the fast tier's kernels are written for (``shaders/gemm_matrix.wgsl``)."""
FEATURE_NAMES = {WGPU_NATIVE: {}, DAWN: {"subgroup": "subgroups", "subgroup-matrix": SUBGROUP_MATRIX}}
"""Our name of a device feature -> the implementation's, where they differ (wgpu-native's are ours)."""


@dataclass(frozen=True)
class Choice:
    implementation: str  # WGPU_NATIVE or DAWN
    why: str

    def describe(self) -> str:
        return f"WebGPU: {self.implementation} ({self.why})"


_choice: Choice | None = None
_refusal: GpuError | None = None  # the first refusal, kept: Dawn says why it refuses an adapter only once
_choosing = threading.Lock()
_toggles_set = False


def choose() -> Choice:
    """The implementation of this process, chosen at the first call (before ``wgpu`` is imported):
    with Dawn, ``wgpu`` is wgpudawn from then on. Raises ``GpuError`` for a ``SAYSO_WEBGPU`` that names
    none, or names Dawn where it can't run."""
    global _choice, _refusal
    with _choosing:
        if _refusal is not None:
            raise _refusal
        if _choice is None:
            try:
                _choice = _decide()
            except GpuError as error:
                _refusal = error
                raise
            if _choice.implementation == DAWN:
                _install_dawn()
            log.info("%s", _choice.describe())
        return _choice


def is_dawn() -> bool:
    return _choice is not None and _choice.implementation == DAWN


def request_device(adapter, features: list[str], limits: dict[str, int]):
    """Open ``adapter``'s device with ``features`` (the implementation's names) and ``limits``; on Dawn
    with its device toggles (``DAWN_DEVICE_TOGGLES_ON``/``_OFF``)."""
    if is_dawn():
        return _dawn_extras().request_device_sync(adapter, required_features=features, required_limits=limits,
                                                  enable_toggles=list(DAWN_DEVICE_TOGGLES_ON),
                                                  disable_toggles=list(DAWN_DEVICE_TOGGLES_OFF))
    return adapter.request_device_sync(required_features=features, required_limits=limits)


def feature_name(ours: str) -> str:
    """The implementation's name of the device feature we call ``ours``."""
    implementation = _choice.implementation if _choice is not None else WGPU_NATIVE
    return FEATURE_NAMES[implementation].get(ours, ours)


def _decide() -> Choice:
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise GpuError(f"{ENV}={value!r} is not one of auto, wgpu, dawn. Unset it to let Sayso choose.")
    wanted = CHOICES[value]
    if wanted == WGPU_NATIVE:
        return Choice(WGPU_NATIVE, f"{ENV}={value}")
    if "wgpu" in sys.modules and not _is_dawn_module(sys.modules["wgpu"]):
        return _refuse(wanted, "wgpu-py was imported before the engine chose")
    if importlib.util.find_spec("wgpudawn") is None:
        return _refuse(wanted, "wgpudawn is not installed")
    try:
        problem = _dawn_adapter_problem()
    except Exception as error:  # noqa: BLE001 - Dawn failing in any way means wgpu-native
        return _refuse(wanted, f"Dawn failed: {' '.join(str(error).split())}")
    if wanted == DAWN:  # asked for by name: Dawn runs without subgroup matrices too, on the other tiers
        return Choice(DAWN, f"{ENV}=dawn" + (f"; {problem}" if problem else ""))
    if problem is None:
        return Choice(DAWN, "its adapter has subgroup matrices")
    return Choice(WGPU_NATIVE, problem)


def _refuse(wanted: str | None, reason: str) -> Choice:
    if wanted == DAWN:
        raise GpuError(f"{ENV}=dawn, but {reason.rstrip('.')}. Unset {ENV}: wgpu-native runs where Dawn can't"
                       f"{' (or reinstall Sayso, which brings wgpudawn)' if 'installed' in reason else ''}.")
    return Choice(WGPU_NATIVE, reason)


def _is_dawn_module(module) -> bool:
    return "wgpudawn" in sys.modules and getattr(module, "__doc__", None) == sys.modules["wgpudawn"].__doc__


def _dawn_extras():
    from wgpudawn.backends.dawn import extras

    return extras


def _dawn_adapter_problem() -> str | None:
    """Why Dawn's high-performance adapter can't run the subgroup-matrix tier, or None where it can.
    Sets Dawn's instance toggles first: its instance is made at this first adapter request."""
    import wgpudawn

    extras = _dawn_extras()
    global _toggles_set
    if not _toggles_set:  # once: Dawn's instance is made at the first request and kept
        extras.set_instance_extras(enable_toggles=list(DAWN_TOGGLES))
        _toggles_set = True
    with _stderr_kept() as said:
        try:
            adapter = wgpudawn.gpu.request_adapter_sync(power_preference="high-performance")
        except RuntimeError:
            adapter = None
    if adapter is None:
        reason = said[0].splitlines()[0].strip() if said and said[0].strip() else "none found"
        raise GpuError(f"no Dawn adapter: {reason}")
    name = adapter.info["device"]
    if SUBGROUP_MATRIX not in adapter.features:
        return f"Dawn's adapter {name!r} has no subgroup matrices"
    configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", [])
    if not any(_config_fits(config) for config in configs):
        return f"Dawn's adapter {name!r} has no f16 -> f32 16x16x16 subgroup matrices"
    return None


@contextlib.contextmanager
def _stderr_kept():
    """What the process writes to its standard error meanwhile, kept from it (a list, filled at the
    end): Dawn writes why it refuses an adapter there itself, which would reach a command's output."""
    said: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to keep
        yield said
        return
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            said.append(kept.read().decode(errors="replace"))
    if said[0].strip():
        log.debug("Dawn said: %s", said[0].strip())


def _config_fits(config: dict) -> bool:
    return all(str(config.get(key)).lower() == str(value) for key, value in MATRIX_CONFIG.items())


def _install_dawn() -> None:
    import wgpudawn

    if "wgpu" not in sys.modules:  # ``_decide`` refused an imported wgpu-py; a Dawn ``wgpu`` stays
        wgpudawn.install_as_wgpu()


ENABLE = re.compile(r"^[ \t]*enable[ \t]+([\w, \t]+);[ \t]*$", re.MULTILINE)
DIAGNOSTIC = re.compile(r"^[ \t]*diagnostic[ \t]*\([^)]*\)[ \t]*;[ \t]*$", re.MULTILINE)
TINT_ONLY = re.compile(r"@diagnostic\(\s*off\s*,\s*subgroup_uniformity\s*\)")
"""An attribute naga doesn't know (it warns on every module that has it): Dawn's alone."""
USES_SUBGROUPS = re.compile(r"\bsubgroup[A-Z]\w*\s*[(<]|@builtin\(\s*subgroup_")


def wgsl_source(source: str) -> str:
    """``source`` (files of ``shaders/`` joined) as the chosen implementation's compiler takes it: its
    ``enable`` and ``diagnostic`` directives first, once each, as WGSL wants them before any
    declaration; on Dawn with ``enable subgroups;`` where it uses subgroup builtins, which Tint
    requires and naga refuses."""
    extensions = dict.fromkeys(name.strip() for names in ENABLE.findall(source) for name in names.split(","))
    extensions.pop("", None)
    if is_dawn() and USES_SUBGROUPS.search(source):
        extensions["subgroups"] = None
    elif not is_dawn():
        extensions.pop("subgroups", None)
        source = TINT_ONLY.sub("", source)
    diagnostics = dict.fromkeys(line.strip() for line in DIAGNOSTIC.findall(source))
    body = DIAGNOSTIC.sub("", ENABLE.sub("", source))
    return "".join(f"enable {name};\n" for name in extensions) + "".join(f"{line}\n" for line in diagnostics) + body
