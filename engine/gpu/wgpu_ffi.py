"""wgpu-py's C declarations compiled once into a cffi module that loads in milliseconds.

wgpu-py declares wgpu-native's API to cffi when it is imported (``ffi.cdef`` over its whole header):
cffi runs pycparser over all of it on every start. Then every new type string wgpu-py names
(``ffi.new("WGPUBufferDescriptor *")``) is parsed again together with a typedef line for each of the
header's types (docs/PERFORMANCE.md: wgpu's C declarations compiled once). cffi's out-of-line ABI
mode does the parsing once, ahead:
``emit_python_code`` writes the declarations as compact type tables that ``_cffi_backend.FFI``
reads without any parser, and it resolves type strings in C.

``import_backend`` imports wgpu's native backend with such an FFI. The compiled module is written to
the cache on the first start (named by the header's checksum, so another wgpu version compiles its own)
and loaded on every later one. wgpu-py makes its FFI as ``FFI(); ffi.cdef(header);
ffi.set_source(...)``, so for the time of that import ``cffi.FFI`` hands out the compiled FFI,
whose ``cdef`` and ``set_source`` have nothing left to do. This leans on how wgpu-py's ``_ffi``
module is written; wgpu is pinned (pyproject.toml), and tests/engine/gpu/test_core.py checks that wgpu-py
runs on the compiled FFI.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import sys
import tempfile
from pathlib import Path

import _cffi_backend
import cffi

from sayso.engine.files import checksum, write_text_atomically
from sayso.engine.gpu import instance

log = logging.getLogger(__name__)

BACKEND = "wgpu.backends.wgpu_native"
GENERATED_HEAD = "import _cffi_backend\n"  # what cffi's generated module begins with after its comment


class CompiledFFI(_cffi_backend.FFI):
    """An out-of-line FFI that lets wgpu-py's import declare what it already holds."""

    def cdef(self, source: str, **options) -> None:
        pass

    def set_source(self, module_name: str, source: str | None, **options) -> None:
        pass


def import_backend(cache: Path) -> None:
    """Import wgpu's native backend on a compiled FFI kept in ``cache`` (built there if missing).

    Anything that goes wrong on the way (a read-only cache, a cffi that writes other code) leaves
    wgpu-py to import as it always does, only slower.
    """
    if BACKEND in sys.modules:
        return
    try:
        ffi = compiled_ffi(cache)
    except Exception as error:  # noqa: BLE001 - any failure here only costs start-up time
        log.warning("wgpu's C declarations are parsed on each start (%s).", error)
        ffi = None
    plain_ffi = cffi.FFI
    if ffi is not None:
        instance.start(ffi)  # the driver starts while wgpu-py's modules import
        cffi.FFI = lambda: ffi
    try:
        importlib.import_module(BACKEND)
    finally:
        cffi.FFI = plain_ffi


def compiled_ffi(cache: Path) -> CompiledFFI:
    """The compiled FFI for the installed wgpu's header, compiled into ``cache`` first if needed
    (also when the file there can't be loaded: a damaged cache is made again, not kept)."""
    # Found without importing wgpu-py, which would hold the instance back (``engine.gpu.instance``).
    header = (instance.wgpu_resources() / "combined_header.h").read_bytes()
    module = cache / f"wgpu_ffi_{checksum(header)}.py"
    if module.exists():
        try:
            return _load(module)
        except Exception as error:  # noqa: BLE001 - whatever is wrong with it, a new one replaces it
            log.warning("Compiling wgpu's C declarations again: %s is unusable (%s).", module, error)
    write_text_atomically(module, _compile(header.decode()))
    return _load(module)


def _load(module: Path) -> CompiledFFI:
    spec = importlib.util.spec_from_file_location(module.stem, module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    if not isinstance(loaded.ffi, CompiledFFI):
        raise TypeError(f"its ffi is a {type(loaded.ffi).__name__}")
    return loaded.ffi


def _compile(header: str) -> str:
    """cffi's out-of-line module for ``header``, made to build a ``CompiledFFI``."""
    builder = cffi.FFI()
    builder.cdef(header)
    builder.set_source("wgpu_ffi", None)
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        path = Path(scratch) / "wgpu_ffi.py"
        builder.emit_python_code(str(path))  # says "generating ..." on stdout, which --json output can't have
        source = path.read_text()
    if GENERATED_HEAD not in source or "_cffi_backend.FFI(" not in source:
        raise RuntimeError("cffi generated a module of an unknown shape")
    return source.replace(GENERATED_HEAD, f"from {__name__} import CompiledFFI\n", 1).replace(
        "_cffi_backend.FFI(", "CompiledFFI(", 1
    )
