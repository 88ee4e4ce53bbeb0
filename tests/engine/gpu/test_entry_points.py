"""The kernels' declarations (``engine.gpu.entry_points``) hold for the shaders, and the fast tier
(``engine.gpu.fast``) is decided by probes: on lavapipe, which offers subgroups, the fast kernels run
and give the portable kernels' results."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.gpu import entry_points as declared
from sayso.engine.gpu.entry_points import FAST_VERSIONS, LAYER_NORM, SOFTMAX, EntryPoint
from sayso.engine.gpu.fast import FAST_ENV, FastTier, layout_problem
from sayso.engine.gpu.kernels import module_source, shaders_dir
from sayso.engine.gpu.recorder import SLOT
from support.wgsl import entry_points, storage_bindings

MODULES = {e.file: entry_points(module_source(e.file)) for e in declared.ALL}


@pytest.mark.parametrize("entry_point", declared.ALL, ids=lambda e: e.name)
def test_each_declaration_is_its_shaders(entry_point: EntryPoint):
    """Bindings 1.. in order, by name: each a storage buffer of the module at that number, and every
    binding the entry point reads among them (it may leave one unread: its pipeline's layout is the
    declaration, engine.gpu.kernels); the parameter struct field by field, name and type."""
    text = MODULES[entry_point.file][entry_point.entry]
    variables = storage_bindings(module_source(entry_point.file))
    assert set(text.bindings) <= set(range(1, len(entry_point.bindings) + 1)), f"it reads bindings {text.bindings}"
    for number, name in enumerate(entry_point.bindings, start=1):
        assert variables.get(name) == number, f"{name} is at binding {variables.get(name)} in the WGSL"
        if number in text.bindings:
            assert name in text.bindings[number], f"binding {number} is {text.bindings[number]} in the WGSL"
    assert list(entry_point.params) == text.params
    assert entry_point.packer.size <= SLOT


def test_every_entry_point_in_the_shaders_is_declared():
    """In a module of several files, the kernels are the last file's."""
    named = {(e.file.split("+")[-1], e.entry) for e in declared.ALL}
    in_files = {path.name: entry_points(path.read_text()) for path in shaders_dir().glob("*.wgsl")}
    assert named == {(file, entry) for file, entries in in_files.items() for entry in entries}


def test_parameters_are_packed_by_their_declared_types():
    arena = bytearray(SLOT)
    LAYER_NORM.pack_into(arena, 0, [3, 384, 1e-5])
    assert struct.unpack_from("<IIf", arena) == (3, 384, pytest.approx(1e-5))
    with pytest.raises(ValueError, match=r"\+norm.wgsl:layer_norm takes \(rows: u32, cols: u32, eps: f32\)"):
        LAYER_NORM.pack_into(arena, 0, [3.0, 384, 1e-5])  # a float where a u32 is declared
    with pytest.raises(ValueError, match="layer_norm takes"):
        LAYER_NORM.pack_into(arena, 0, [3, 384])  # a field missing


def test_every_pipeline_of_both_tiers_builds(gpu_ops):
    for entry_point in declared.ALL:
        if all(feature in gpu_ops.device.features for feature in entry_point.needs):
            assert gpu_ops.kernels.pipeline(entry_point.file, entry_point.entry) is not None


def test_the_probes_turn_on_each_fast_kernel_the_device_can_run(gpu_ops):
    tier = gpu_ops.fast
    tier.probe()
    print(f"\n{gpu_ops.describe()}")
    assert "subgroup" in gpu_ops.device.features  # lavapipe and real GPUs: else this test says nothing
    for fast in FAST_VERSIONS.values():
        verdict = tier.verdicts[fast.name]
        missing = [feature for feature in fast.needs if feature not in gpu_ops.device.features]
        if missing:  # subgroup matrices: only Dawn on a GPU with them
            assert verdict == f"off (the device has no {', '.join(missing)})"
        elif fast.min_subgroup > 4 and verdict != "on":  # written for subgroups wider than lavapipe's 8 lanes
            assert f"subgroup size 8 (the kernel takes a power of two from {fast.min_subgroup} to 32)" in verdict
        else:
            assert verdict == "on", fast.name
    assert tier.version(LAYER_NORM) is FAST_VERSIONS[LAYER_NORM]
    assert "reduce_subgroup.wgsl+norm.wgsl:layer_norm on" in gpu_ops.describe()
    assert "reduce_subgroup.wgsl+kv_cache.wgsl:attend on" in gpu_ops.describe()


def test_the_probes_read_back_without_a_map_read_buffer():
    """On wgpu-native the probes' read-backs (up to 1024 invocations' layouts, 8 KB) come back in parts
    through write-mapped staging: one MAP_READ buffer would cost the process a 64 MB block of pinned
    memory before a model has run (engine.gpu.recorder.SMALL_READ). Dawn has no such block, nor
    write-mapped reads (wgpu-native's mappable primary buffers): there they come back through MAP_READ."""
    from sayso.engine.gpu import GpuOps, webgpu
    from sayso.engine.gpu.recorder import SMALL_READ

    assert max(size for fast in FAST_VERSIONS.values() for size in fast.probe_sizes) * 8 > SMALL_READ
    ops = GpuOps()  # a recorder and staging buffers of its own
    ops.fast.probe()
    assert "on" in ops.fast.verdicts.values()
    write_mapped = not webgpu.is_dawn()
    assert ops.device.write_mapped_reads == write_mapped
    assert ops.recorder._staging and all(for_writing == write_mapped for _, for_writing in ops.recorder._staging)


def test_sayso_fast_0_forces_the_portable_tier(portable_ops):
    assert portable_ops.fast.versions == {}
    assert set(portable_ops.fast.verdicts.values()) == {f"off ({FAST_ENV}=0)"}
    assert "off (SAYSO_FAST=0)" in portable_ops.describe()


def test_sayso_fast_leaves_named_kernels_off(gpu_ops, monkeypatch):
    """``SAYSO_FAST=-entry``: that fast version off, the others probed as usual (a model measured with and
    without one kernel)."""
    from sayso.engine.gpu import GpuOps

    gpu_ops.fast.probe()
    on = [name for name, verdict in gpu_ops.fast.verdicts.items() if verdict == "on"]
    left_off = on[0].split(":")[1]
    monkeypatch.setenv(FAST_ENV, f"-{left_off}")
    ops = GpuOps()
    ops.fast.probe()
    assert ops.fast.verdicts[on[0]] == f"off ({FAST_ENV}=-{left_off})"
    assert [name for name, verdict in ops.fast.verdicts.items() if verdict == "on"] == on[1:]


@pytest.mark.parametrize("cols", [1, 7, 64, 384, 1500])
def test_fast_row_kernels_give_the_portable_results(gpu_ops, portable_ops, cols):
    """Same inputs through both tiers, every workgroup size the row kernels use (by ``cols``)."""
    gpu_ops.fast.probe()
    x = np.random.default_rng(cols).standard_normal((5, cols)).astype(np.float32) * 3 + 1
    w, b = (np.random.default_rng(cols + 1).standard_normal((2, cols)).astype(np.float32))
    for ops in (gpu_ops, portable_ops):
        tensors = ops.tensor(x), ops.tensor(w), ops.tensor(b)
        normed = ops.read(ops.layer_norm(*tensors, 1e-5))
        soft = ops.read(ops.softmax(tensors[0]))
        if ops is gpu_ops:
            fast = normed, soft
    np.testing.assert_allclose(fast[0], normed, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fast[1], soft, rtol=1e-5, atol=1e-7)
    mean, std = x.mean(axis=1, keepdims=True), x.std(axis=1, keepdims=True)
    np.testing.assert_allclose(fast[0], (x - mean) / np.sqrt(std**2 + 1e-5) * w + b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k", [5, 384, 1500])
def test_the_fast_gemv_gives_the_portable_result(gpu_ops, portable_ops, k):
    """A decoder step's product, its row normalised first (gemv's NORM), through both tiers."""
    from sayso.engine.ops import RowNorm, WeightSource

    rng = np.random.default_rng(k)
    a, w = rng.standard_normal((1, k)).astype(np.float32), rng.standard_normal((70, k)).astype(np.float32)
    norm_w, norm_b = rng.standard_normal((2, k)).astype(np.float32)
    results = []
    for ops in (gpu_ops, portable_ops):
        weight = ops.weight(WeightSource("w", "F32", w.shape, w))
        norm = RowNorm(ops.tensor(norm_w), ops.tensor(norm_b), 1e-5)
        results.append(ops.read(ops.gemv(ops.tensor(a), weight, norm=norm)))
    assert gpu_ops.fast.version(declared.GEMV) is declared.GEMV_SUBGROUP
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-4)


def test_a_shader_its_compiler_refuses_turns_only_its_kernel_off(gpu_ops, monkeypatch):
    """A fast version whose shader doesn't build (here: one that isn't there; on Dawn, one Tint refuses)
    is off, saying why; the others keep their probes' verdicts."""
    broken = EntryPoint("no_such_shader.wgsl", "layer_norm", LAYER_NORM.bindings, LAYER_NORM.params, ("subgroup",),
                        "ln_out", (256,))
    monkeypatch.setattr("sayso.engine.gpu.fast.FAST_VERSIONS", {SOFTMAX: FAST_VERSIONS[SOFTMAX], LAYER_NORM: broken})
    tier = FastTier(gpu_ops)
    tier.probe()
    assert tier.versions == {SOFTMAX: FAST_VERSIONS[SOFTMAX]}
    assert tier.verdicts[broken.name].startswith("off (it does not build: Shader ")
    assert "no_such_shader.wgsl is missing" in tier.verdicts[broken.name]


def test_a_device_error_in_the_probes_turns_the_whole_tier_off(gpu_ops, monkeypatch):
    """A probe's dispatch that fails on the device: then no fast kernel is trusted, however the others
    fared."""
    tier = FastTier(gpu_ops)
    reads = []

    def read_small(out):
        reads.append(out)
        if len(reads) == 2:
            raise GpuError("GPU error on the device while running recorded work: a dispatch failed")
        return FastTier._read_small(tier, out)

    monkeypatch.setattr(tier, "_read_small", read_small)
    tier.probe()
    assert tier.versions == {}
    assert all(verdict.startswith("off (a device error in the probes") for verdict in tier.verdicts.values())


def test_a_layout_the_kernels_are_not_written_for_is_named():
    lanes = np.arange(64) % 32
    assert layout_problem(np.full(64, 32.0), lanes.astype(np.float32), 64) is None
    assert "several sizes" in layout_problem(np.r_[np.full(32, 32.0), np.full(32, 16.0)], lanes, 64)
    assert "size 2" in layout_problem(np.full(64, 2.0), np.arange(64) % 2, 64)
    assert "invocation 1 is lane 2" in layout_problem(np.full(64, 32.0), (np.arange(64) * 2) % 32, 64)


def test_the_reader_finds_what_a_kernel_reaches_through_its_functions():
    text = entry_points(module_source(LAYER_NORM.file))["layer_norm"]
    assert text.params == [("rows", "u32"), ("cols", "u32"), ("eps", "f32")]
    assert {n: sorted(v) for n, v in text.bindings.items()} == {1: ["x"], 2: ["w"], 3: ["b"], 4: ["ln_out"]}


@pytest.mark.parametrize("n_tokens", [3, 34, 1025, 8193])
def test_the_fast_choices_give_the_portable_ones(gpu_ops, portable_ops, n_tokens):
    """A transducer's choice and Whisper's selection (one workgroup each, their partials merged by
    ``reduce_partial``) through both tiers, on logits with ties (the lowest index wins in both), at
    vocabularies that give each a different workgroup size."""
    from sayso.engine.ops import WhisperRules

    rng = np.random.default_rng(n_tokens)
    logits = rng.integers(-3, 3, (1, n_tokens)).astype(np.float32)  # many ties for the largest
    stamps = max(1, n_tokens // 4)
    rules = WhisperRules(n_vocab=n_tokens, eot=n_tokens - stamps - 1, timestamp_begin=n_tokens - stamps,
                         suppress=(), begin_suppress=(), timestamps=True, max_initial_timestamp=stamps)
    results = []
    for ops in (gpu_ops, portable_ops):
        state, ids = ops.transducer_state(4), ops.ids(np.zeros(1, np.uint32))
        ops.transducer_choose(ops.tensor(logits), None, state, ids, 3, n_tokens, 0)
        selection = ops.whisper_selection(rules, 4)
        for _ in range(3):
            ops.whisper_select(ops.tensor(logits), selection)
        results.append((ops.read(state), ops.read_whisper_selection(selection)))
    assert gpu_ops.fast.version(declared.TRANSDUCER_CHOOSE) is declared.TRANSDUCER_CHOOSE_SUBGROUP
    assert gpu_ops.fast.version(declared.WHISPER_SELECT) is declared.WHISPER_SELECT_SUBGROUP
    (fast_state, (fast_tokens, fast_logprobs)), (state, (tokens, logprobs)) = results
    assert fast_state[0, :7].tolist() == state[0, :7].tolist()  # header, and the emission's token, frame, duration
    assert state[0, 4] == np.argmax(logits) != n_tokens - 1  # the first of the largest, not the blank
    np.testing.assert_allclose(fast_state[0, 7:8].view(np.float32), state[0, 7:8].view(np.float32), rtol=1e-5)
    assert fast_tokens.tolist() == tokens.tolist() and len(tokens) == 3
    np.testing.assert_allclose(fast_logprobs, logprobs, rtol=1e-5, atol=1e-6)


def test_a_pipeline_binds_every_declared_buffer_even_one_its_kernel_leaves_unread(gpu_ops):
    """``gemm_splits_sum`` reads no weight, yet binds ``w`` and ``scales`` as ``gemm_short`` does: the
    layout is the declaration's, not what naga finds read."""
    split_sum = declared.GEMM_SPLITS_SUM
    read = MODULES[split_sum.file][split_sum.entry].bindings
    assert {2, 3}.isdisjoint(read) and split_sum.bindings[1:3] == ("w", "scales")
    device = gpu_ops.device.device
    buffers = [device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE) for _ in split_sum.bindings]
    params = device.create_buffer(size=SLOT, usage=wgpu.BufferUsage.UNIFORM)
    pipeline = gpu_ops.kernels.pipeline(split_sum.file, split_sum.entry)
    entries = [{"binding": 0, "resource": {"buffer": params, "offset": 0, "size": SLOT}}]
    entries += [{"binding": number, "resource": {"buffer": buffer, "offset": 0, "size": 16}}
                for number, buffer in enumerate(buffers, start=1)]
    assert device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries) is not None
