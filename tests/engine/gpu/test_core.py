"""The GPU layer itself: device description, the recorder's caches, and how failures surface."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

from support.gpu import wgpu_native_only
from sayso.engine.errors import GpuError
from sayso.engine.gpu.entry_points import ADD, MARK
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import size_class
from sayso.engine.ops import WeightSource

pytestmark = pytest.mark.gpu


def test_describe_names_backend_adapter_type_and_features(gpu_ops):
    line = gpu_ops.describe()
    info = gpu_ops.device.info
    assert line.startswith(("wgpu-native ", "dawn "))
    for part in (info["backend_type"], info["device"], info["adapter_type"], "features:"):
        assert part in line
    assert "\n" not in line


def test_round_trip_of_floats_and_ids(gpu_ops):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(gpu_ops.read(gpu_ops.tensor(x)), x)
    ids = np.array([0, 7, 51863, 2**31], dtype=np.uint32)
    np.testing.assert_array_equal(gpu_ops.read(gpu_ops.ids(ids)), ids)


def test_read_later_gives_the_buffer_as_it_was_when_asked(gpu_ops):
    x = gpu_ops.tensor(np.ones(4, np.float32))
    first = gpu_ops.read_later(x)
    gpu_ops.device.queue.write_buffer(x.buffer, 0, np.full(4, 2.0, np.float32))  # lands after first's copy
    second = gpu_ops.read_later(x)
    np.testing.assert_array_equal(second(), 2.0)  # collected in either order, each from its own copy
    np.testing.assert_array_equal(first(), 1.0)


def test_small_reads_map_for_writing_and_large_ones_for_reading(gpu_ops):
    """On wgpu-native small reads come back through staging buffers mapped for writing (no MAP_READ
    buffer, whose memory wgpu-native takes from a 64 MB pinned block), large ones through MAP_READ;
    Dawn, which has neither the block nor write-mapped reads, reads both through MAP_READ. All give
    the data."""
    from sayso.engine.gpu import webgpu
    from sayso.engine.gpu.recorder import SMALL_READ, DispatchRecorder

    write_mapped = not webgpu.is_dawn()  # lavapipe and the H200 offer wgpu-native mappable-primary-buffers
    assert gpu_ops.device.write_mapped_reads == write_mapped
    recorder = DispatchRecorder(gpu_ops.device, gpu_ops.kernels)  # its own staging buffers
    rng = np.random.default_rng(1)
    for n in (1, 100, SMALL_READ // 4 - 4):  # the mark's 16 bytes come with each read
        x = gpu_ops.tensor(rng.standard_normal(n).astype(np.float32))
        assert recorder.read(x.buffer, x.nbytes) == gpu_ops.read(x).tobytes()
    assert recorder._staging and all(for_writing == write_mapped for _, for_writing in recorder._staging)
    x = gpu_ops.tensor(rng.standard_normal(SMALL_READ).astype(np.float32))
    assert recorder.read(x.buffer, x.nbytes - 8, 8) == gpu_ops.read(x).tobytes()[8:]  # from byte 8 on
    assert any(not for_writing for _, for_writing in recorder._staging)


def test_columns_of_one_row_are_read_alone(gpu_ops):
    x = np.arange(20, dtype=np.float32).reshape(1, 20)
    tensor = gpu_ops.tensor(x)
    np.testing.assert_array_equal(gpu_ops.read(gpu_ops.columns(tensor, 7, 10)), x[:, 7:10])
    with pytest.raises(ValueError, match="one row"):
        gpu_ops.read(gpu_ops.columns(gpu_ops.tensor(np.zeros((2, 4), np.float32)), 1, 2))


def test_repeated_sequence_creates_no_new_bind_groups(gpu_ops):
    recorder = gpu_ops.recorder
    mark = gpu_ops.empty((4,), np.uint32)

    def sequence():
        for i in range(3):
            gpu_ops.run(MARK, [mark], [i], (1, 1, 1))
        gpu_ops.flush()

    sequence()
    created = recorder.stats["bind_groups_created"]
    sequence()
    assert recorder.stats["bind_groups_created"] == created


def test_a_repeatable_recording_is_replayed_once_two_calls_agree(gpu_ops, cpu_ops):
    """Each call records the same step on a position counter (embed at it, pack and attend, advance
    it): from the third call on the recorder replays the second's dispatches without calling the
    function, and the GPU does the same work as the numpy backend calling it every time (each row
    lands where its call's position says, so attending over them all gives the same answer)."""
    rng = np.random.default_rng(0)
    table, positions = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((6, 8)).astype(np.float32)
    query = rng.standard_normal((1, 8)).astype(np.float32)

    def decode(ops, calls):
        weight = ops.weight(WeightSource("table", "F32", table.shape, table))
        positions_on, ids = ops.tensor(positions), ops.ids(np.array([3]))
        cache, at = ops.kv_cache(1, 8, 6), ops.position(0)

        def step():
            calls.append(1)
            row = ops.embed(ids, weight, positions_on, at)
            ops.kv_pack(cache, row, row, at)
            ops.attend(row, cache, at + 1)  # packs the row
            ops.advance(at, 1)

        repeated = ops.repeatable(step)
        for _ in range(6):
            ops.flush()  # each call at the start of a submission, as a decoder's batches are
            repeated()
        assert ops.read(at.counter)[0] == 6
        return ops.read(ops.attend(ops.tensor(query), cache, 6, causal=False))

    gpu_calls, cpu_calls = [], []
    replayed = gpu_ops.recorder.stats["replayed"]
    np.testing.assert_allclose(decode(gpu_ops, gpu_calls), decode(cpu_ops, cpu_calls), rtol=2e-3, atol=2e-3)
    assert len(gpu_calls) == 2 and len(cpu_calls) == 6
    assert gpu_ops.recorder.stats["replayed"] - replayed == 4 * 3  # embed, attend, advance


def test_a_recording_that_changes_or_is_cut_by_a_submission_is_never_replayed(gpu_ops):
    mark = gpu_ops.empty((4,), np.uint32)
    values, calls = iter(range(100)), []

    def changing():  # a parameter that differs at every call
        calls.append(1)
        gpu_ops.run(MARK, [mark], [next(values)], (1, 1, 1))

    def reading():  # the same dispatch, but a read-back submits in the middle of it
        calls.append(1)
        gpu_ops.run(MARK, [mark], [7], (1, 1, 1))
        gpu_ops.read(mark)

    for record in (changing, reading):
        calls.clear()
        repeated = gpu_ops.repeatable(record)
        for _ in range(4):
            gpu_ops.flush()
            repeated()
        assert len(calls) == 4


def test_pool_reuses_buffers_of_freed_tensors(gpu_ops):
    a = gpu_ops.empty((100, 7))
    buffer = a.buffer
    del a
    b = gpu_ops.empty((100, 7))
    assert b.buffer is buffer


def test_an_encoder_is_submitted_a_few_layers_at_a_time(gpu_ops):
    """``in_submissions``: the GPU starts on the first layers while the next are recorded; the last
    layers' work waits for whatever reads the result, as before."""
    from sayso.engine.layers import LAYERS_PER_SUBMISSION, in_submissions

    x = gpu_ops.tensor(np.ones(4, np.float32))
    gpu_ops.flush()
    before = gpu_ops.recorder.stats["submissions"]
    for _ in in_submissions(gpu_ops, range(2 * LAYERS_PER_SUBMISSION + 1)):
        x = gpu_ops.add(x, x)
    assert gpu_ops.recorder.stats["submissions"] == before + 2
    np.testing.assert_array_equal(gpu_ops.read(x), np.full(4, 2.0 ** (2 * LAYERS_PER_SUBMISSION + 1)))
    assert gpu_ops.recorder.stats["submissions"] == before + 3


def test_dropped_submission_is_an_error_not_stale_output(gpu_ops):
    x = gpu_ops.tensor(np.ones(4, np.float32))
    gpu_ops.run(MARK, [gpu_ops.empty((4,), np.uint32)], [1], (1, 1, 1))
    gpu_ops.flush()
    # What a driver that cancelled the submission leaves behind: the mark was never written.
    gpu_ops.device.queue.write_buffer(gpu_ops.recorder.mark, 0, np.zeros(4, np.uint32))
    with pytest.raises(GpuError, match="dropped a submission"):
        gpu_ops.read(x)
    gpu_ops.run(MARK, [gpu_ops.empty((4,), np.uint32)], [1], (1, 1, 1))
    np.testing.assert_array_equal(gpu_ops.read(x), 1.0)  # the next submission is fine again


def test_binding_a_destroyed_buffer_is_a_gpu_error(gpu_ops):
    """wgpu-native refuses the binding, Dawn the submission that uses it."""
    dead = gpu_ops.device.buffer(64)
    dead.destroy()
    with pytest.raises(GpuError, match="destroyed"):
        gpu_ops.run(MARK, [dead], [1], (1, 1, 1))
        gpu_ops.recorder.submit()


def test_lost_device_is_reported_as_such():
    from sayso.engine.gpu import GpuOps

    ops = GpuOps()
    x = ops.tensor(np.ones(4, np.float32))
    ops.device.device.destroy()
    with pytest.raises(GpuError, match="was lost"):
        ops.read(ops.tensor(np.ones(4, np.float32)))
    del x


def test_helpers():
    assert grid(10) == (10, 1, 1)
    x, y, _ = grid(200_000)
    assert x <= 65535 and x * y >= 200_000
    assert size_class(1) == 256 and size_class(65537) >= 65537


def test_kernel_timing_counts_each_dispatch_and_changes_no_result(gpu_ops):
    """``DispatchRecorder.time_kernels`` (``sayso bench --kernels``): every dispatch in a timestamped pass of its
    own, its GPU time added to its kernel; the results are those of an untimed run, and a run longer
    than one timed submission holds is cut into several without losing a dispatch."""
    rng = np.random.default_rng(0)
    x = gpu_ops.tensor(rng.standard_normal((64, 96)).astype(np.float32))
    expected = gpu_ops.read(gpu_ops.add(gpu_ops.add(x, x), x))
    timer = gpu_ops.recorder.time_kernels()
    try:
        y = x
        for _ in range(2100):  # more than the 2048 dispatches of one timed submission
            y = gpu_ops.add(y, x)
        got = gpu_ops.read(gpu_ops.add(gpu_ops.add(x, x), x))
        total = gpu_ops.read(y)
    finally:
        gpu_ops.recorder.stop_timing()
    np.testing.assert_array_equal(got, expected)
    want, xs = gpu_ops.read(x), gpu_ops.read(x)
    for _ in range(2100):
        want = want + xs  # float32 additions round the same on every IEEE device
    np.testing.assert_array_equal(total, want)
    print("\n" + timer.table())
    add = timer.kernels["elementwise.wgsl:add"]
    assert add.calls == 2102 and add.ns > 0
    assert timer.kernels["mark.wgsl:main"].calls == 2  # one per submission: the cut at 2048, then the read
    assert timer.busy_ms == sum(k.ns for k in timer.kernels.values()) / 1e6
    after = gpu_ops.read(gpu_ops.add(x, x))  # untimed again
    np.testing.assert_array_equal(after, 2 * gpu_ops.read(x))


@wgpu_native_only
def test_wgpu_runs_on_c_declarations_compiled_like_cffi_parses_them(gpu_ops, tmp_path, caplog):
    """wgpu-py's FFI in this process is ``engine.gpu.wgpu_ffi``'s compiled one, and it declares every
    type, function and constant of wgpu.h as cffi's own parse of the header does. A compiled module
    that can't be loaded is compiled again."""
    import cffi
    from wgpu._coreutils import get_header_filename
    from wgpu.backends.wgpu_native._ffi import ffi, lib, lib_path

    from sayso.engine.gpu.wgpu_ffi import CompiledFFI, compiled_ffi

    assert isinstance(ffi, CompiledFFI)
    parsed = cffi.FFI()
    parsed.cdef(Path(get_header_filename("combined_header.h")).read_text())

    def spelled(ctype) -> str:  # the compiled FFI names "typedef struct X {..} X" as "struct X"
        return re.sub(r"\b(struct|union|enum) ", "", ctype.cname)

    typedefs = [name.split(" ", 1)[1] for name in parsed._parser._declarations if name.startswith("typedef ")]
    assert len(typedefs) > 400
    for name in typedefs:
        ours, theirs = ffi.typeof(name), parsed.typeof(name)
        assert (spelled(ours), ours.kind) == (spelled(theirs), theirs.kind), name
        if ours.kind in ("struct", "union"):
            assert ffi.sizeof(ours) == parsed.sizeof(theirs), name
            assert [(f, d.offset, spelled(d.type)) for f, d in ours.fields] == [
                (f, d.offset, spelled(d.type)) for f, d in theirs.fields
            ], name
    parsed_lib = parsed.dlopen(lib_path)
    assert dir(lib) == dir(parsed_lib) and len(dir(lib)) > 500

    def entry(ffi, lib, name: str):  # a constant's value or a function's type
        try:
            value = getattr(lib, name)
        except Exception:  # noqa: BLE001 - a header constant with no value: either FFI refuses it, each its way
            return "unreadable"
        return value if isinstance(value, int) else spelled(ffi.typeof(value))

    for name in dir(lib):
        assert entry(ffi, lib, name) == entry(parsed, parsed_lib, name), name
    first = compiled_ffi(tmp_path)
    (module,) = tmp_path.glob("wgpu_ffi_*.py")
    module.write_text("not python (")
    again = compiled_ffi(tmp_path)
    assert isinstance(first, CompiledFFI) and isinstance(again, CompiledFFI)
    assert again.sizeof("WGPUBufferDescriptor") == parsed.sizeof("WGPUBufferDescriptor")
    assert "Compiling wgpu's C declarations again" in caplog.text
    assert module.read_text().startswith("# auto-generated file")


def test_pipelines_built_once_are_built_ahead_at_the_next_start(gpu_ops, tmp_path, caplog):
    """A registry lists what it builds; the next one on the adapter builds the list on worker
    threads at once, and hands those out; a damaged list is ignored, with a warning."""
    from sayso.engine.gpu.kernels import Kernels, known_pipelines_file

    known = known_pipelines_file(gpu_ops.device, tmp_path)
    assert gpu_ops.device.info["device"].split()[0].lower() in known.name
    first = Kernels(gpu_ops.device, known)
    first.pipeline("mark.wgsl")
    first.pipeline("elementwise.wgsl", "add")
    second = Kernels(gpu_ops.device, known)
    assert set(second.building) | set(second.pipelines) == set(first.pipelines)
    ahead = [future.result() for future in list(second.building.values())]
    assert second.pipeline("elementwise.wgsl", "add") in ahead + list(second.pipelines.values())
    assert not second.building
    x = gpu_ops.tensor(np.arange(4, dtype=np.float32))
    out = gpu_ops.empty((4,))
    add = second.pipeline("elementwise.wgsl", "add")
    gpu_ops.recorder.dispatch(add, ADD, [x.buffer, x.buffer, out.buffer], [4], (1, 1, 1))
    np.testing.assert_array_equal(gpu_ops.read(out), 2 * np.arange(4))
    known.write_text("not json")
    assert not Kernels(gpu_ops.device, known).building
    assert "Ignoring the list of kernels" in caplog.text


def test_each_model_file_builds_ahead_only_what_it_used(gpu_ops, tmp_path):
    """The list is kept per model file (its name and size): a start of one model builds ahead none of
    the pipelines another model's starts built."""
    from sayso.engine.gpu.kernels import Kernels, known_pipelines_file

    whisper, parakeet = tmp_path / "whisper.gguf", tmp_path / "parakeet.gguf"
    whisper.write_bytes(b"w" * 10)
    parakeet.write_bytes(b"p" * 20)
    lists = tmp_path / "kernels"
    lists.mkdir()
    for_whisper = known_pipelines_file(gpu_ops.device, lists, whisper)
    Kernels(gpu_ops.device, for_whisper).pipeline("mark.wgsl")
    for_parakeet = known_pipelines_file(gpu_ops.device, lists, parakeet)
    adapter_and_shaders = known_pipelines_file(gpu_ops.device, lists).stem
    assert for_parakeet != for_whisper
    assert all(listed.stem.startswith(adapter_and_shaders + "-") for listed in (for_whisper, for_parakeet))
    assert not Kernels(gpu_ops.device, for_parakeet).building
    assert Kernels(gpu_ops.device, known_pipelines_file(gpu_ops.device, lists, whisper)).building
    parakeet.write_bytes(b"p" * 21)  # another file by the same name
    assert known_pipelines_file(gpu_ops.device, lists, parakeet) != for_parakeet


@pytest.mark.parametrize("checks", ["0", "1", "2"])
def test_modules_made_with_fewer_runtime_checks_compute_the_same(gpu_ops, monkeypatch, checks):
    """``SAYSO_SHADER_CHECKS`` makes modules through wgpu-native's trusted path with only those of naga's
    checks (loop bounding, bounds checks); a kernel with loops computes what it does with all of them."""
    from sayso.engine.gpu import native
    from sayso.engine.gpu.entry_points import GEMM
    from sayso.engine.gpu.kernels import Kernels

    monkeypatch.setenv(native.SHADER_CHECKS_ENV, checks)
    kernels = Kernels(gpu_ops.device)
    assert kernels.checks == int(checks)
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((5, 40)).astype(np.float32), rng.standard_normal((7, 40)).astype(np.float32)
    weight = gpu_ops.weight(WeightSource("w", "F32", w.shape, w))
    out = gpu_ops.empty((5, 7))
    pipeline = kernels.pipeline(GEMM.file, GEMM.entry, WTYPE=0)
    params = [5, 7, 40, weight.k_pad, 0, 1.0, 0.0]
    gpu_ops.recorder.dispatch(pipeline, GEMM, [gpu_ops.tensor(a).buffer, weight.data, weight.data, weight.data,
                                               weight.data, out.buffer], params, (1, 1, 1))
    np.testing.assert_allclose(gpu_ops.read(out), a @ w.T, rtol=1e-5, atol=1e-5)


def test_shader_checks_other_than_0_to_3_are_refused(monkeypatch):
    from sayso.engine.gpu import native

    monkeypatch.setenv(native.SHADER_CHECKS_ENV, "all")
    with pytest.raises(GpuError, match="SAYSO_SHADER_CHECKS='all' is not one of 0 to 3"):
        native.shader_checks()


def test_the_kernel_list_is_per_version_of_the_shaders(gpu_ops, tmp_path, monkeypatch):
    import shutil

    from sayso.engine.gpu.kernels import known_pipelines_file, shaders_dir

    before = known_pipelines_file(gpu_ops.device, tmp_path)
    copy = tmp_path / "shaders"
    shutil.copytree(shaders_dir(), copy)
    (copy / "mark.wgsl").write_text((copy / "mark.wgsl").read_text() + "\n// changed\n")
    monkeypatch.setattr("sayso.engine.gpu.kernels.shaders_dir", lambda: copy)
    assert known_pipelines_file(gpu_ops.device, tmp_path) != before


@wgpu_native_only
def test_wgpu_uses_the_instance_created_while_it_imported(gpu_ops):
    """``engine.gpu.instance`` creates wgpu-native's instance on its own thread while wgpu-py's
    modules import; the device in use came from that instance, which looks at the primary backends
    only (no OpenGL adapter is offered)."""
    import wgpu
    from wgpu.backends.wgpu_native import _helpers

    from sayso.engine.gpu import instance

    assert instance._started is not None and instance._started.result() == _helpers._the_instance
    assert gpu_ops.device.info["backend_type"] != "OpenGL"
    assert all(adapter.info["backend_type"] != "OpenGL" for adapter in wgpu.gpu.enumerate_adapters_sync())


@wgpu_native_only
def test_wgpu_public_api_path_gives_the_same_text(tmp_path):
    """With another wgpu-py than the one ``engine.gpu.native`` knows (forced by SAYSO_WGPU_PUBLIC=1),
    the engine reaches into none of wgpu-py's internals and transcribes the same text; importing
    ``engine.gpu`` imports no wgpu-py either way (only Dawn's, to choose between them)."""
    import os
    import subprocess
    import sys

    from support.data import AUDIO, TINY_EN_GGUF

    script = (
        "import sys\n"
        "import sayso.engine.gpu\n"
        "assert not any(m == 'wgpu' or m.startswith('wgpu.') for m in sys.modules), 'engine.gpu imported wgpu'\n"
        "from sayso.engine.engine import Engine\n"
        "from sayso.engine.gpu import native\n"
        "engine = Engine(sys.argv[1], device='gpu', vad=False)\n"
        "print(native.NATIVE)\n"
        "print(engine.transcribe_file(sys.argv[2]).text)\n"
    )
    texts = {}
    for public in ("0", "1"):
        env = {**os.environ, "SAYSO_WGPU_PUBLIC": public, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        child = subprocess.run([sys.executable, "-c", script, str(TINY_EN_GGUF), str(AUDIO / "jfk.wav")],
                               capture_output=True, text=True, env=env, timeout=300)
        assert child.returncode == 0, child.stderr[-2000:]
        native_path, text = child.stdout.splitlines()[-2:]
        assert native_path == str(public == "0")
        texts[public] = text
    assert texts["0"] == texts["1"] and "ask not what your country can do for you" in texts["0"].lower()


def resident_kib_of_memfd(name: str) -> int:
    """Resident KiB of this process's mappings of the memfd called ``name`` (a model's private copy)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and "-" in parts[0] and not parts[0].endswith(":"):  # a mapping's first line
            inside = len(parts) > 5 and parts[5] == f"/memfd:{name}"
        elif inside and parts[0] == "Rss:":
            total += int(parts[1])
    return total


@pytest.mark.parametrize("family", ["parakeet-tdt-v3", "gigaam-v3-rnnt", "gigaam-v3-ctc"])
def test_a_model_on_the_gpu_leaves_its_weights_out_of_the_private_copy(family, tmp_path):
    """The model file's private copy (``engine.gguf.reader.PrivateCopy``) holds only what the host
    still reads once the weights are on the GPU: they are read from the file, conformer weights
    (flattened, sliced, stacked or folded at load) as much as any, and what is computed from a weight
    at load is computed from its bytes (the same text on both backends). The numpy backend, which
    reads its weights from the copy, keeps most of them there (its small tensors it reads from the file)."""
    from support.data import AUDIO
    from sayso.engine.audio import load_audio
    from sayso.engine.convert.random_model import write_random_model
    from sayso.engine.engine import Engine

    path = write_random_model(family, tmp_path / f"{family}-pages.gguf", small=True, quantized=True)
    speech = load_audio(AUDIO / "jfk.wav")[:48000]
    resident, texts = {}, {}
    for device in ("cpu", "gpu"):
        engine = Engine(path, device=device, vad=False)
        for copy in [t for t in threading.enumerate() if t.name == f"copy of {path.name}"]:
            copy.join(30)  # the numpy backend's copy goes on behind its load
        texts[device] = engine.transcribe(speech).text  # after a pass: what either backend reads lazily is read
        resident[device] = resident_kib_of_memfd(path.name)
        del engine
    print(f"\n{family}: {resident}")
    assert texts["gpu"] == texts["cpu"]
    # The mapped count varies from run to run with the order the loading threads take the weights in
    # (stacked parts' whole pages go once copied; a page fault maps the pages around it too).
    assert resident["cpu"] > 0.6 * path.stat().st_size / 1024
    assert resident["gpu"] < 0.6 * resident["cpu"]
