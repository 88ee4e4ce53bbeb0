"""Every WGSL entry point the engine dispatches, declared once: its module (a file of ``shaders/``, or
files joined by ``+``: ``engine.gpu.kernels.module_source``), the storage buffers it binds
at 1.. (named as the WGSL names them; with the parameters they are its pipeline's layout, so a kernel
may leave one unread) and its parameter struct at binding 0, field by field with the field's WGSL type.
``pack_into`` packs a dispatch's parameters by those types, so an int can't reach an ``f32`` field as
its bit pattern, nor a float a ``u32``; a test reads the shaders and checks each declaration against
them (``tests/engine/gpu/test_entry_points.py``).

A fast version (``needs`` device features) stands beside the portable one it replaces, with the same
bindings and parameters; ``engine.gpu.fast`` decides, by probing, which fast versions a device runs.
Most replace theirs in every dispatch; one that takes a grid of its own (``ATTENTION_TILED_SUBGROUP``)
is chosen by its op, which asks the tier whether it is on.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

FORMATS = {"u32": "I", "i32": "i", "f32": "f"}
"""``struct`` codes of the WGSL scalar types a parameter struct holds (4 bytes each)."""


@dataclass(frozen=True)
class EntryPoint:
    file: str
    entry: str
    bindings: tuple[str, ...]
    params: tuple[tuple[str, str], ...]
    needs: tuple[str, ...] = ()  # device features a fast version needs; a portable one needs none
    probe_output: str = ""  # a fast version's output binding, where its probe writes what it saw
    probe_sizes: tuple[int, ...] = ()  # the workgroup sizes (WG) it runs with: each is probed
    sized_by_wg: bool = True  # whether the override WG sets its workgroup size (else it is fixed)
    min_subgroup: int = 4  # the smallest subgroup it is written for
    same_grid: bool = True  # a fast version on its portable one's grid: run() swaps it in; else its op does
    packer: struct.Struct = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "packer", struct.Struct("<" + "".join(FORMATS[t] for _, t in self.params)))

    @property
    def name(self) -> str:
        return f"{self.file}:{self.entry}"

    def pack_into(self, arena: bytearray, offset: int, values: Sequence[int | float]) -> None:
        """``values``, one per declared field in order, into ``arena`` at ``offset``."""
        try:
            self.packer.pack_into(arena, offset, *values)
        except struct.error as error:
            fields = ", ".join(f"{name}: {type_}" for name, type_ in self.params)
            raise ValueError(f"{self.name} takes ({fields}), not {list(values)}: {error}") from None


def _fields(names: str, type_: str = "u32") -> tuple[tuple[str, str], ...]:
    return tuple((name, type_) for name in names.split())


ROW = _fields("rows cols") + (("eps", "f32"),)
GROUP = _fields("t c groups cg n chunk chunks") + (("eps", "f32"),)
LINEAR = _fields("m n k k_pad scale_stride") + (("alpha", "f32"), ("eps", "f32"))
CACHE = _fields("rows heads capacity pos0 length causal") + (("scale", "f32"),) + _fields(
    "blocks groups q_at k_at v_at stride packs span")

# ---- portable ---------------------------------------------------------------------------------------
NORM = "reduce_workgroup.wgsl+norm.wgsl"
LAYER_NORM = EntryPoint(NORM, "layer_norm", ("x", "w", "b", "ln_out"), ROW)
SOFTMAX = EntryPoint(NORM, "softmax", ("x", "sm_out"), ROW)
GROUP_STATS = EntryPoint(NORM, "group_stats", ("x", "partials_out"), GROUP)
GROUP_COMBINE = EntryPoint(NORM, "group_combine", ("partials", "stats_out"), GROUP)
GROUP_APPLY = EntryPoint(NORM, "group_apply", ("x", "stats", "gw", "gb", "gn_out"), GROUP)
GLU = EntryPoint("activation.wgsl", "glu", ("x", "out"), _fields("rows d"))
SWIGLU = EntryPoint("activation.wgsl", "swiglu", ("x", "out"), _fields("rows d"))
ROTARY = EntryPoint("rotary.wgsl", "main", ("x", "turns_per_pos", "out"), _fields("t width head_dim rot_dim pos0"))
ADD = EntryPoint("elementwise.wgsl", "add", ("x", "y", "out"), _fields("count"))
EMBED = EntryPoint("embed.wgsl", "main", ("ids", "table", "scales", "positions", "out", "at"),
                   _fields("t d k_pad scale_stride pos0 n_positions"))
LINEARS = "reduce_workgroup.wgsl+gemm.wgsl"
GEMM = EntryPoint(LINEARS, "gemm", ("a", "w", "scales", "bias", "residual", "c"), LINEAR)
GEMM_SHORT = EntryPoint(LINEARS, "gemm_short", GEMM.bindings, LINEAR)
GEMM_SPLITS_SUM = EntryPoint(LINEARS, "gemm_splits_sum", GEMM.bindings, LINEAR)
GEMM_LARGE = EntryPoint(LINEARS, "gemm_large", ("a_vec", "w", "scales", "bias", "residual", "c"), LINEAR)
GEMV = EntryPoint(LINEARS, "gemv", ("a_vec", "w", "scales", "bias", "residual", "c", "norm_w", "norm_b"), LINEAR)
FLASH = _fields("tq tk heads causal") + (("scale", "f32"),) + _fields("groups batch span left right")
ATTENTION = EntryPoint("attention.wgsl", "main", ("q", "k", "v", "out"), FLASH)
ATTENTION_RELATIVE = EntryPoint("attention.wgsl", "relative", ("q", "k", "v", "out", "positions", "position_bias"),
                                FLASH)
TILED = _fields("tq tk heads") + (("scale", "f32"),) + _fields("groups batch")
ATTENTION_TILED = EntryPoint("attention_blocks.wgsl+attention_tiled.wgsl", "main", ("q", "k", "v", "out"), TILED)
KV = "reduce_workgroup.wgsl+kv_cache.wgsl"
KV_PACK = EntryPoint(KV, "pack", ("pack_k", "pack_v", "cache", "at"), CACHE)
KV_ATTEND = EntryPoint(KV, "attend", ("pack_k", "pack_v", "cache", "at", "attend_q", "attend_partials"), CACHE)
KV_COMBINE = EntryPoint(KV, "combine", ("combine_partials", "combine_out"), CACHE)
IM2COL = EntryPoint("conv.wgsl", "im2col", ("x", "unfolded"), _fields("t c kernel stride pad t_out batch"))
DEPTHWISE_CONV = EntryPoint("conv.wgsl", "depthwise_conv", ("x", "taps", "bias", "conv_out"), _fields("t c k pad_left"))
IMAGE = _fields("h w c h_out w_out") + (("scale", "f32"),)
IM2COL_3X3_S2 = EntryPoint("conv.wgsl", "im2col_3x3_s2", ("x", "flat"), IMAGE)
DEPTHWISE_3X3_S2 = EntryPoint("conv.wgsl", "depthwise_3x3_s2", ("x", "taps", "bias", "conv_out"), IMAGE)
CHANNELS_MAJOR = EntryPoint("conv.wgsl", "channels_major", ("x", "flat"), IMAGE)
WHISPER_LOG_MEL = EntryPoint("frontend.wgsl", "whisper_log_mel", ("mel", "out"), _fields("rows frames cols"))
PARTIALS = "reduce_workgroup.wgsl+online_softmax.wgsl+partials_workgroup.wgsl"
WHISPER_SELECT = EntryPoint(PARTIALS + "+whisper_select.wgsl", "main", ("logits", "masks", "state", "ids"),
                            _fields("n_vocab eot timestamp_begin timestamps max_initial_timestamp capacity words"))
TRANSDUCER = PARTIALS + "+transducer.wgsl"
JOINT_HIDDEN = EntryPoint(TRANSDUCER, "joint_hidden", ("encoder", "prediction", "hidden_state", "hidden"),
                          _fields("frames width"))
TRANSDUCER_CHOOSE = EntryPoint(TRANSDUCER, "choose", ("logits", "durations", "state", "ids"),
                               _fields("frames n_tokens n_durations max_symbols capacity"))
LSTM_CELL = EntryPoint(TRANSDUCER, "lstm_cell", ("gates", "cell_state", "c", "h", "input_gates", "cell_token"),
                       _fields("hidden table_stride"))
ADVANCE = EntryPoint("position.wgsl", "advance", ("counter",), _fields("by"))
MARK = EntryPoint("mark.wgsl", "main", ("mark",), _fields("serial"))

# ---- fast: subgroup reductions (of row kernels, gemv, the one-workgroup choices and attend) ----------
NORM_SUBGROUP = "reduce_subgroup.wgsl+norm.wgsl"
ROW_SIZES = (32, 64, 128, 256)  # the row kernels' workgroup sizes (engine.gpu.ops.norm._row_threads)
LAYER_NORM_SUBGROUP = EntryPoint(NORM_SUBGROUP, "layer_norm", LAYER_NORM.bindings, ROW, ("subgroup",), "ln_out",
                                 ROW_SIZES)
SOFTMAX_SUBGROUP = EntryPoint(NORM_SUBGROUP, "softmax", SOFTMAX.bindings, ROW, ("subgroup",), "sm_out", ROW_SIZES)

LINEARS_SUBGROUP = "reduce_subgroup.wgsl+gemm.wgsl"
GEMV_SUBGROUP = EntryPoint(LINEARS_SUBGROUP, "gemv", GEMV.bindings, LINEAR, ("subgroup",), "c", (256,))

PARTIALS_SUBGROUP = "reduce_subgroup.wgsl+online_softmax.wgsl+partials_subgroup.wgsl"
CHOICE_SIZES = (64, 128, 256, 512, 1024)  # one-workgroup choices' sizes (engine.gpu.ops.base.reduction_threads)
WHISPER_SELECT_SUBGROUP = EntryPoint(PARTIALS_SUBGROUP + "+whisper_select.wgsl", "main", WHISPER_SELECT.bindings,
                                     WHISPER_SELECT.params, ("subgroup",), "state", CHOICE_SIZES)
TRANSDUCER_CHOOSE_SUBGROUP = EntryPoint(PARTIALS_SUBGROUP + "+transducer.wgsl", "choose", TRANSDUCER_CHOOSE.bindings,
                                        TRANSDUCER_CHOOSE.params, ("subgroup",), "state", CHOICE_SIZES)

KV_ATTEND_SUBGROUP = EntryPoint("reduce_subgroup.wgsl+kv_cache.wgsl", "attend", KV_ATTEND.bindings, CACHE,
                                ("subgroup",), "attend_partials", (64,))  # KEY_BLOCK in engine.gpu.ops.attention

# ---- fast: encoder attention with each row's max found by subgroup shuffles -------------------------
ATTENTION_TILED_SUBGROUP = EntryPoint("attention_blocks.wgsl+attention_tiled_subgroup.wgsl", "main",
                                      ATTENTION_TILED.bindings, TILED, ("subgroup",), "out", (256,), sized_by_wg=False,
                                      min_subgroup=16, same_grid=False)

# ---- fast: GEMM on subgroup matrices (tensor cores, on Dawn) ---------------------------------------
GEMM_MATRIX = EntryPoint(LINEARS + "+gemm_matrix.wgsl", "gemm_matrix", GEMM_LARGE.bindings, LINEAR,
                         ("subgroup-matrix", "shader-f16", "subgroup"), "c", (128,), sized_by_wg=False,
                         min_subgroup=32, same_grid=False)

FAST_VERSIONS = {LAYER_NORM: LAYER_NORM_SUBGROUP, SOFTMAX: SOFTMAX_SUBGROUP, GEMV: GEMV_SUBGROUP,
                 WHISPER_SELECT: WHISPER_SELECT_SUBGROUP, TRANSDUCER_CHOOSE: TRANSDUCER_CHOOSE_SUBGROUP,
                 KV_ATTEND: KV_ATTEND_SUBGROUP, ATTENTION_TILED: ATTENTION_TILED_SUBGROUP, GEMM_LARGE: GEMM_MATRIX}
"""Each portable entry point that has a fast version, and that version; one on a grid of its own is
keyed by the portable kernel it stands in for (its op chooses it)."""

ALL = [value for value in list(globals().values()) if isinstance(value, EntryPoint)]
BY_NAME = {(entry_point.file, entry_point.entry): entry_point for entry_point in ALL}
"""Each declaration by its module and entry point, the names a pipeline is built by."""
