"""The operations every compute backend offers: the contract between model code and backends.

Two contracts, which every backend implements (``Backend``): ``Ops``, the operations every model family
uses, and ``WhisperOps``, Whisper's own decoding operations (its log-mel and its token selection). Model
code (``engine/whisper``, ``engine/moonshine``, ...) is written once against the one it needs and runs
on either backend:

* ``engine.gpu.GpuOps``: WGSL kernels through wgpu; tensors live in GPU buffers and calls are
  *recorded*, then submitted when a result is read back (``read``) or ``flush`` is called.
* ``engine.cpu.NumpyOps``: numpy; tensors are ``np.ndarray`` and calls run at once. It is the oracle
  of the kernel tests and the engine's fallback when there is no real GPU.

Conventions that hold for every method:

* Activations are float32, row-major, time-major: a sequence of ``T`` frames of ``C`` channels is
  ``[T, C]``. Multi-head tensors keep heads side by side in the channel axis: ``[T, H*dh]``, head
  ``h`` owning columns ``h*dh .. (h+1)*dh``.
* A linear weight is ``[N, K]`` (out features, in features), the PyTorch and GGUF layout, and
  keeps its GGUF type (F32, F16, Q8_0) on the backend: ``Weight`` objects come from ``Ops.weight()``.
* Methods return new tensors; inputs are never modified unless the docstring says so (KV caches).
* Token ids are a backend tensor of uint32 (``ids``) so that a token chosen on the GPU can feed the next
  step's embedding without a read-back.
* Greedy decoding can stay on the backend for many steps: ``WhisperOps.whisper_select`` picks the next
  token under Whisper's logit rules, writes it where the next step's ``embed`` reads it and keeps the
  history, which is read back once for several steps (``read_whisper_selection``).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from sayso.engine.gguf.header import TENSOR_TYPES

_BLOCKS = {name: (values, nbytes) for name, values, nbytes in TENSOR_TYPES.values()}
"""A weight type's values per block and bytes per block (a value is a block of one for F32 and F16)."""

Activation = Literal["none", "gelu", "silu", "relu", "tanh", "square"]
"""The elementwise function applied to ``a·Wᵀ + b`` in ``gemm``/``gemv``. GELU is the exact erf form;
``square`` is x², a spectrum's power (``engine.whisper.frontend.BackendLogMel``)."""


class Tensor(Protocol):
    """A backend's activation tensor: ``np.ndarray`` on the CPU backend, ``GpuTensor`` on the GPU one.
    Model code reads its shape and hands it back to the ops; its values only through ``Ops.read``."""

    @property
    def shape(self) -> tuple[int, ...]: ...


class Weight(Protocol):
    """A linear weight [N, K] as a backend keeps it (``Ops.weight``): a float32 ``np.ndarray`` or a
    ``Q8Weight`` on the CPU backend, a ``GpuWeight`` on the GPU one. Only the ops read its values."""

    @property
    def shape(self) -> tuple[int, ...]: ...


class KVCache(Protocol):
    """A K/V cache for ``capacity`` positions of ``n_heads`` heads of ``head_dim`` (``Ops.kv_cache``),
    written by ``Ops.kv_pack`` and read by ``Ops.attend``; each backend lays it out its own way."""

    @property
    def n_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def capacity(self) -> int: ...


class WeightSource:
    """A weight as it sits in a model file: the raw GGUF blocks plus their logical shape.

    ``data`` holds the tensor's rows: float32 ``[N, K]`` for F32, float16 ``[N, K]`` for F16, uint8
    ``[N, K/32*34]`` for Q8_0 (each block of 32 values: one f16 scale then 32 int8). ``shape`` is the
    logical numpy shape, e.g. ``(N, K)``; convolution kernels are flattened to 2-D (``flattened``).

    A model file's weight (``ModelFile.tensor``) is read only when asked for, in one of two ways:

    * ``data``: a read-only view of the model's mapping, filled from the file when first asked, for a
      backend that reads it there for as long as the model is loaded (numpy). ``release`` frees the
      mapping's pages once a backend holds a copy of its own: ``release()`` all of them,
      ``release(start, stop)`` those of rows start .. stop; nothing reads them after.
    * ``read(start, stop, into)``: rows start .. stop read from the file into memory the caller gives,
      for a backend that copies each weight once (a GPU) a part at a time through memory it reuses:
      the weight never takes memory in the mapping, which filling would allocate, zero and copy into,
      page by page.

    ``data`` may be given as the array, or as a function that makes it when first asked; ``reader``
    reads rows from the file (``read``), where the source has one.
    """

    def __init__(self, name: str, ggml_type: str, shape: tuple[int, ...],
                 data: np.ndarray | Callable[[], np.ndarray], release: Callable[..., None] | None = None,
                 reader: Callable[[int, int, memoryview | None], np.ndarray] | None = None):
        self.name = name
        self.ggml_type = ggml_type  # "F32" | "F16" | "Q8_0"
        self.shape = tuple(shape)
        self.release = release
        self.reader = reader
        self._data = data

    @property
    def data(self) -> np.ndarray:
        if callable(self._data):  # two threads may both make it: each gets the same rows
            self._data = self._data()
        return self._data

    @property
    def row_bytes(self) -> int:
        """Bytes of a row (the first axis) in the file: its values, or Q8_0's blocks."""
        block_values, block_bytes = _BLOCKS[self.ggml_type]
        return math.prod(self.shape[1:]) // block_values * block_bytes

    def read(self, start: int, stop: int, into: memoryview | None = None) -> np.ndarray:
        """Rows start .. stop in ``data``'s layout: read from the file where the source can, into
        ``into`` (at least ``(stop - start) * row_bytes``; the result is a view of it) or an array of
        their own; else ``data``'s rows."""
        return self.reader(start, stop, into) if self.reader else self.data[start:stop]

    def flattened(self) -> WeightSource:
        """The weight as 2-D [N, K], its trailing axes (a conv kernel's [C_in, k]) flattened into K:
        the same rows, the same bytes."""
        n, k = self.shape[0], math.prod(self.shape[1:])
        reader = self.reader and (lambda start, stop, into: self.reader(start, stop, into).reshape(stop - start, -1))
        return WeightSource(self.name, self.ggml_type, (n, k), lambda: np.asarray(self.data).reshape(n, -1),
                            self.release, reader)

    def rows(self, start: int, stop: int) -> WeightSource:
        """Rows start .. stop of a 2-D weight as a weight of its own (half of a conv module's first
        pointwise conv)."""
        def release(a: int = 0, b: int | None = None) -> None:
            self.release(start + a, stop if b is None else min(stop, start + b))

        reader = self.reader and (lambda a, b, into: self.reader(start + a, start + b, into))
        return WeightSource(f"{self.name}[{start}:{stop}]", self.ggml_type, (stop - start, *self.shape[1:]),
                            lambda: self.data[start:stop], self.release and release, reader)

    @staticmethod
    def stacked(name: str, parts: list[WeightSource]) -> WeightSource:
        """2-D weights of one type and width stacked by rows: one product where a model runs several on
        the same input. Its ``data`` is a copy, after which the parts' pages go (``release``)."""
        if len({p.ggml_type for p in parts}) != 1 or len({p.shape[1:] for p in parts}) != 1:
            described = ", ".join(f"{p.name} {p.ggml_type} {p.shape}" for p in parts)
            raise ValueError(f"{name}: can't stack weights of different types or widths ({described})")
        starts = np.cumsum([0] + [p.shape[0] for p in parts])

        def data() -> np.ndarray:
            stack = np.concatenate([np.asarray(p.data) for p in parts])
            for part in parts:
                if part.release is not None:
                    part.release()
            return stack

        def reader(start: int, stop: int, into: memoryview | None) -> np.ndarray:
            pieces, at = [], 0  # each part's rows read into the next bytes of ``into``
            for part, a, b in zip(parts, starts, starts[1:]):
                if a < stop and start < b:
                    lo, hi = max(start, a) - a, min(stop, b) - a
                    pieces.append(part.read(lo, hi, None if into is None else into[at:]))
                    at += (hi - lo) * part.row_bytes
            if into is None:
                return np.concatenate(pieces)
            first = pieces[0]
            return np.frombuffer(into, first.dtype, at // first.itemsize).reshape(stop - start, *first.shape[1:])

        from_file = all(p.reader for p in parts)
        return WeightSource(name, parts[0].ggml_type, (int(starts[-1]), *parts[0].shape[1:]), data, None,
                            reader if from_file else None)


@dataclass(eq=False)
class RowNorm:
    """A LayerNorm that ``gemv`` applies to its row before the product: weight [K], bias [K] or
    None, eps. A decoder step's norms then cost no dispatch of their own on a GPU."""

    weight: Tensor
    bias: Tensor | None
    eps: float


@dataclass(frozen=True)
class Position:
    """A decoder position held on the backend: the value of ``counter`` (a backend tensor [1] of
    uint32, made by ``Ops.position`` and moved by ``Ops.advance``) plus ``offset``.

    ``embed``, ``kv_pack`` and ``attend`` take one where they take an int position or length. A
    decoder step recorded with one is the same work at every position, so a GPU can replay its
    recording (``Ops.repeatable``) instead of running the model's Python again each step.
    """

    counter: Tensor
    offset: int = 0

    def __add__(self, n: int) -> Position:
        return Position(self.counter, self.offset + n)


TRANSDUCER_HEADER = 4
"""State words before the emissions in ``Ops.transducer_state`` (and shaders/transducer.wgsl's HEADER)."""

JOINT_ACTIVATIONS = ("relu", "tanh", "sigmoid")
"""The joint networks' hidden activations, in the order of shaders/transducer.wgsl's ACT codes."""


def check_relative_attention(q, k, v, positions, bias, n_heads: int) -> int:
    """The span L of the position tables, raising ValueError unless q, k, v [T, H*dh], positions
    [2L-1, H*dh] and bias [2L-1, H] with L >= T fit ``Ops.relative_attention``, on either backend."""
    t, width = q.shape
    rows = positions.shape[0]
    if (k.shape != q.shape or v.shape != q.shape or rows % 2 == 0 or rows < 2 * t - 1
            or positions.shape != (rows, width) or bias.shape != (rows, n_heads)):
        raise ValueError(f"relative_attention: q {q.shape}, k {k.shape}, v {v.shape}, positions "
                         f"{positions.shape} and bias {bias.shape} don't fit {n_heads} heads over {t} positions")
    return (rows + 1) // 2


class Ops(abc.ABC):
    """The operations every model family uses, and what a backend says of itself. See the module
    docstring for layout conventions."""

    name: str  # "gpu" or "cpu", for people to read: code asks the capabilities below, never the name

    runs_beside_host: bool = False
    """Whether the backend's work runs off the CPU (a GPU): numpy work beside it (voice detection, a
    frontend) then keeps to a few BLAS threads (``engine.engine.HOST_BLAS_THREADS``)."""

    folds_row_norms: bool = False
    """Whether ``gemv`` with ``norm`` saves work over ``layer_norm`` then ``gemv`` (a GPU: a dispatch);
    ``engine.layers.layer_norm`` leaves a decoder step's norms to the products only then."""

    features_on_backend: bool = False
    """Whether a family computes its frontend's features with these ops rather than in numpy (a GPU:
    no upload of the features, and the CPU is not the one step the GPU waits for). Whisper's log-mel
    (``engine.whisper.frontend.BackendLogMel``) does."""

    searches_on_backend: bool = False
    """Whether a transducer's greedy search runs on the backend (``engine.conformer.search``: a GPU,
    where a step on the host would wait on a read-back) rather than on the host
    (``engine.conformer.heads``: the step's few products are quicker than a dispatch there)."""

    reads_weights_in_place: bool = True
    """Whether the backend reads its weights' ``data`` in the model file's mapping, for as long as the
    model is loaded (numpy), rather than copying each from the file once (a GPU, ``WeightSource.read``):
    ``engine.families.load`` then has the file copied into the mapping while the model loads
    (``ModelFile.copy_in_background``)."""

    max_tensor_bytes: int = 2**62
    """The largest tensor the backend takes: a GPU binds each whole (``max-storage-buffer-binding-size``,
    128 MiB on some); numpy, as large as memory allows. A batched pass's products keep within it."""

    search_steps_per_read: int = 1
    """Steps of a transducer's greedy search (``engine.conformer.search``) to record between read-backs
    of its state: on a GPU enough that a round trip is rare; the steps recorded past the end change
    nothing."""

    # ---- data movement ------------------------------------------------------------------------

    @abc.abstractmethod
    def tensor(self, array: np.ndarray) -> Tensor:
        """Upload a float32 array (any shape) as a tensor that lives as long as the caller keeps it."""

    @abc.abstractmethod
    def ids(self, ids: np.ndarray) -> Tensor:
        """Upload token ids ``[T]`` (uint32)."""

    @abc.abstractmethod
    def weight(self, source: WeightSource) -> Weight:
        """Make a 2-D ``[N, K]`` weight from its GGUF blocks, keeping its type where the backend can."""

    def loading(self) -> AbstractContextManager:
        """A context in which a model's weights are made one after another (``engine.families.load``):
        the GPU backend copies them on threads of its own while the loader goes on, and they are whole
        when it ends. None of them may be used inside. No-op on the CPU backend."""
        return nullcontext()

    @abc.abstractmethod
    def read(self, x: Tensor) -> np.ndarray:
        """Return ``x`` as a numpy array (float32, or uint32 for ids); submits pending GPU work."""

    def read_later(self, x: Tensor) -> Callable[[], np.ndarray]:
        """Start reading ``x`` back as it is now; the function returned gives it, waiting if it must.
        Between the two a GPU backend can record more work and run it (the CPU backend reads at once)."""
        value = self.read(x)
        return lambda: value

    def describe(self) -> str:
        """One line saying what this backend runs on (logs, ``sayso doctor``, benchmarks)."""
        return self.name

    def flush(self) -> None:
        """Submit recorded work without reading anything back (no-op on the CPU backend)."""

    def close(self) -> None:
        """Let go of the backend's device once nothing will run on it again (``Engine.close``, and a
        GPU the engine moved off): a GPU's memory and driver threads. No-op on the CPU backend."""

    def errors(self, what: str) -> AbstractContextManager:
        """A context in which the backend's own exceptions become ``SaysoError``s saying what failed
        while doing ``what`` (the GPU backend: any wgpu error, a lost device, to ``GpuError``), so the
        engine's callers see one kind of error whichever backend runs. No-op on the CPU backend."""
        return nullcontext()

    def repeatable(self, record: Callable[[], None]) -> Callable[[], None]:
        """A function that records what ``record()`` records, each time it is called.

        ``record`` must record the same work at every call (positions as ``Position``s, tensors that
        the backend hands out again in the same order) and do nothing but record: a GPU backend
        replays an earlier call's dispatches instead of calling it once two calls in a row recorded
        the same ones, which takes the Python out of a decoder's steps. The CPU backend calls it."""
        return record

    # ---- linear algebra -----------------------------------------------------------------------

    @abc.abstractmethod
    def gemm(
        self,
        a: Tensor,
        w: Weight,
        bias: Tensor | None = None,
        act: Activation = "none",
        residual: Tensor | None = None,
        alpha: float = 1.0,
    ) -> Tensor:
        """``c = act(a·Wᵀ + bias)``, then ``c = residual + alpha·c`` when ``residual`` is given.

        a: [M, K]; w: [N, K]; bias: [N]; residual: [M, N]; returns [M, N]. The residual epilogue
        is how every pre-LN block adds its branch back (alpha 0.5 for a Conformer's half FFN),
        GELU+residual is the FFN's second half when the add comes after the activation.
        """

    @abc.abstractmethod
    def gemv(
        self,
        a: Tensor,
        w: Weight,
        bias: Tensor | None = None,
        act: Activation = "none",
        residual: Tensor | None = None,
        alpha: float = 1.0,
        norm: RowNorm | None = None,
    ) -> Tensor:
        """``gemm`` for a single row, a: [1, K] -> [1, N]: the decoder's case, where a GEMM's tiles
        would leave most of the GPU idle. Same epilogues as ``gemm``; with ``norm`` the row is
        ``layer_norm(a, norm.weight, norm.bias, norm.eps)`` first."""

    @abc.abstractmethod
    def add(self, x: Tensor, y: Tensor) -> Tensor:
        """Elementwise ``x + y``; both [M, N] (e.g. a positional table onto conv output)."""

    # ---- embeddings -----------------------------------------------------------------------------

    @abc.abstractmethod
    def embed(self, ids: Tensor, table: Weight, positions: Tensor | None, pos0: int | Position) -> Tensor:
        """Token rows plus position rows: ``out[t] = table[ids[t]] + positions[pos0 + t]``.

        ids: [T] uint32; table: weight [V, D] (any weight type); positions: [P, D] float32 or None;
        returns [T, D]. ``pos0`` lets a decoder step embed at its place in the sequence. The caller
        keeps ``pos0 + T`` within the table: a GPU can't check a ``Position`` when recording (rows
        past the table get no position row there).
        """

    # ---- normalisation and activations ----------------------------------------------------------

    @abc.abstractmethod
    def layer_norm(self, x: Tensor, w: Tensor | None, b: Tensor | None, eps: float = 1e-5) -> Tensor:
        """Normalise each row of x: [M, D] over D, then ``* w + b`` (w, b: [D], either may be None)."""

    @abc.abstractmethod
    def group_norm(self, x: Tensor, groups: int, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
        """GroupNorm on time-major x: [T, C]: channels split into ``groups`` groups of C/groups;
        each group is normalised over all its T·C/groups values, then the per-channel affine w, b: [C].
        (Moonshine's stem uses one group.)"""

    @abc.abstractmethod
    def softmax(self, x: Tensor) -> Tensor:
        """Softmax of each row of x: [M, N] over N."""

    @abc.abstractmethod
    def glu(self, x: Tensor) -> Tensor:
        """x: [M, 2D] -> [M, D]: ``x[:, :D] * sigmoid(x[:, D:])`` (the Conformer conv module's gate)."""

    @abc.abstractmethod
    def swiglu(self, x: Tensor) -> Tensor:
        """x: [M, 2D] -> [M, D]: ``x[:, :D] * silu(x[:, D:])`` (Moonshine's decoder FFN: value first,
        gate second)."""

    # ---- convolution ------------------------------------------------------------------------------

    @abc.abstractmethod
    def im2col(self, x: Tensor, kernel: int, stride: int, pad: int, batch: int = 1) -> Tensor:
        """Unfold x: [T, C] for a conv1d computed as a GEMM.

        Returns [T_out, C*kernel] with column ``c*kernel + j`` = ``x[t*stride + j - pad, c]`` (zero
        outside), T_out = (T + 2*pad - kernel) // stride + 1. The column order matches a conv weight
        [C_out, C, kernel] flattened to [C_out, C*kernel], so ``gemm(im2col(x), w)`` is the conv.
        ``batch``: x is that many sequences of T/batch rows one after the other, each unfolded on its
        own (zero outside it), giving [batch*T_out, C*kernel]: one GEMM convolves them all.
        """

    @abc.abstractmethod
    def depthwise_conv(self, x: Tensor, w: Tensor, b: Tensor | None, pad_left: int) -> Tensor:
        """Depthwise conv1d, stride 1: x: [T, C], w: [C, k], b: [C] -> [T, C];
        ``out[t, c] = b[c] + sum_j w[c, j] * x[t + j - pad_left, c]`` (zero outside). ``pad_left`` =
        (k-1)//2 gives 'same' padding, k-1 a causal conv."""

    @abc.abstractmethod
    def im2col_3x3_s2(self, x: Tensor, height: int, width: int) -> Tensor:
        """Unfold an image x: [H*W, C] (H rows of W pixels, pixel-major) for a 3x3 conv2d at stride 2
        with padding 1 computed as a GEMM. Returns [H'*W', C*9], H' = (H-1)//2 + 1 (W' likewise), with
        column ``c*9 + 3i + j`` = pixel (2h'+i-1, 2w'+j-1)'s channel c (zero outside): the order of a
        conv weight [C_out, C, 3, 3] flattened to [C_out, C*9]."""

    @abc.abstractmethod
    def depthwise_3x3_s2(self, x: Tensor, height: int, width: int, w: Tensor, b: Tensor) -> Tensor:
        """Depthwise 3x3 conv2d at stride 2 with padding 1 of an image x: [H*W, C], w: [C, 9] (tap
        3i + j), b: [C] -> [H'*W', C]."""

    @abc.abstractmethod
    def channels_major(self, x: Tensor, height: int, width: int, scale: float = 1.0) -> Tensor:
        """An image x: [H*W, C] -> [H, C*W], column ``c*W + w`` = ``scale * x[h*W + w, c]``: each row of
        pixels flattened channel by channel, as NeMo's subsampling feeds its projection."""

    # ---- attention --------------------------------------------------------------------------------

    @abc.abstractmethod
    def attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        n_heads: int,
        causal: bool = False,
        scale: float | None = None,
        batch: int = 1,
    ) -> Tensor:
        """Multi-head attention over whole sequences (encoders, prompt prefill), flash style.

        q: [Tq, H*dh], k and v: [Tk, H*dh] -> [Tq, H*dh]. ``scale`` defaults to 1/sqrt(dh).
        ``causal``: query i sees keys j <= i + (Tk - Tq). ``batch``: q, k and v are that many
        sequences one after the other (Tq/batch and Tk/batch rows each), each attending to its own
        keys only: the windows of a batched encoder pass. ``causal`` is not taken with it.
        """

    @abc.abstractmethod
    def relative_attention(self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor, bias: Tensor, n_heads: int,
                           scale: float, window: tuple[int, int] | None = None) -> Tensor:
        """Transformer-XL relative-position self-attention (Parakeet), flash style, every head at once.

        q, k, v: [T, H*dh]; positions: [2L-1, H*dh] with L >= T, row r is relative position (L-1) - r;
        bias: [2L-1, H] -> [T, H*dh]. The score of query i and key j in head h, with r = (L-1) + j - i,
        is ``(q_i·k_j + q_i·positions[r]) * scale + bias[r, h]`` (head h's columns), then softmax over
        j. The bias carries what does not depend on the query (Transformer-XL's (v - u)·P term, scaled).
        The tables may be made for a longer L than T, so a model keeps one pair for every length up to
        the longest it has seen. ``window`` = (left, right) lets query i see keys i-left..i+right only
        (local attention); None is full attention. The position term is taken inside the walk over
        the keys: an [H, T, 2T-1] table of it would outgrow the attention itself on long audio.
        """

    @abc.abstractmethod
    def rotary(self, x: Tensor, n_heads: int, rot_dim: int, base: float, pos0: int, interleaved: bool) -> Tensor:
        """Rotary position embedding on the first ``rot_dim`` dims of each head of x: [T, H*dh].

        Row t has position ``pos0 + t``; pair i (i < rot_dim/2) turns by ``(pos0+t) * base**(-2i/rot_dim)``.
        interleaved=True pairs dims (2i, 2i+1) (Moonshine, GPT-J); False pairs (i, i + rot_dim/2)
        (GPT-NeoX / HF rotate_half). Dims past rot_dim pass through.
        """

    # ---- a transducer's greedy search (engine.conformer.search) ------------------------------------

    @abc.abstractmethod
    def transducer_state(self, capacity: int) -> Tensor:
        """A new search's state, uint32 [1, TRANSDUCER_HEADER + 4 * capacity]: at frame 0, no token
        emitted, the predictor to take its start input. Its words: [0] the encoder frame t, [1] tokens
        emitted on t without moving on, [2] emissions n, [3] 1 while the predictor is to take the last
        emission (``lstm_cell`` updates only then), and from ``TRANSDUCER_HEADER`` one emission per four
        words: token, frame, duration, probability (float32 bits)."""

    @abc.abstractmethod
    def joint_hidden(self, encoder: Tensor, prediction: Tensor, state: Tensor, activation: str) -> Tensor:
        """The joint's hidden layer at the state's frame t: encoder [T, J] (the joint's encoder
        projection), prediction [1, J] -> act(encoder[t] + prediction) [1, J], ``activation`` one of
        ``JOINT_ACTIVATIONS``. Undefined once t reaches T."""

    @abc.abstractmethod
    def transducer_choose(self, logits: Tensor, durations: Tensor | None, state: Tensor, ids: Tensor,
                          frames: int, n_tokens: int, max_symbols: int) -> None:
        """One greedy step from logits [1, n_tokens (+ durations)] (the blank last among the tokens), in
        place on ``state`` and ``ids`` [1]. The token is the largest logit (first on ties); with
        ``durations`` (uint32 [D], TDT) the duration is ``durations`` at the largest of the last D logits.
        A token other than the blank is recorded (with its softmax probability among the tokens), written
        to ``ids`` and sets word 3; a blank clears it. TDT moves t on by the duration, and by one more
        when the duration is 0 and the token is the blank or the ``max_symbols``-th on this frame; RNN-T
        moves on by one after a blank or the ``max_symbols``-th token (0: no limit). A full state ends
        the search (t = ``frames``); once t reaches ``frames`` a step changes nothing but word 3."""

    @abc.abstractmethod
    def lstm_cell(self, gates: Tensor, state: Tensor, c: Tensor, h: Tensor,
                  input_gates: tuple[Weight, Tensor] | None = None) -> None:
        """One LSTM layer's update, in place, when the state's word 3 is set: gates [1, 4H] (PyTorch's
        order i, f, g, o, products and bias summed), cell c [1, H] and output h [1, H]. ``input_gates``,
        a table [V, 4H] and token ids [1], adds the table's row of the token to the gates first: the
        first layer's input gates looked up in the same step."""

    @abc.abstractmethod
    def position(self, value: int) -> Position:
        """A new ``Position`` on the backend holding ``value``."""

    @abc.abstractmethod
    def advance(self, position: Position, by: int) -> None:
        """Add ``by`` to ``position``'s counter, on the backend, in order with the work recorded."""

    @abc.abstractmethod
    def kv_cache(self, n_heads: int, head_dim: int, capacity: int) -> KVCache:
        """Allocate an empty K/V cache for ``capacity`` positions of ``n_heads`` heads (f16 on the GPU)."""

    @abc.abstractmethod
    def columns(self, x: Tensor, start: int, stop: int) -> Tensor:
        """Columns ``start .. stop`` of x [T, N] without a copy: the q, k and v of one stacked
        projection (``engine.layers.stacked_linear``). ``kv_pack`` and ``attend`` read them in place,
        and ``read``/``read_later`` those of a tensor of one row; on the GPU no other method takes them."""

    @abc.abstractmethod
    def rows(self, x: Tensor, start: int, stop: int) -> Tensor:
        """Rows ``start .. stop`` of x [T, N] without a copy: one window's encoder states out of a
        batched pass. ``kv_pack`` reads them in place, and ``read`` reads them; on the GPU no other
        method takes them."""

    @abc.abstractmethod
    def kv_pack(self, cache: KVCache, k: Tensor, v: Tensor, pos0: int | Position) -> None:
        """Write K and V rows k, v: [T, H*dh] (tensors or ``columns``) into the cache at positions
        pos0 .. pos0+T-1 (in place). The caller keeps them within the capacity: a GPU can't check a
        ``Position`` when recording (rows past the capacity are not written there)."""

    @abc.abstractmethod
    def attend(
        self, q: Tensor, cache: KVCache, length: int | Position, causal: bool = True, scale: float | None = None
    ) -> Tensor:
        """Attention of new query rows over a cache holding ``length`` positions (at most its capacity).

        q: [Tq, H*dh] (a tensor or ``columns``) -> [Tq, H*dh]. With ``causal`` row i sees positions
        0 .. length - Tq + i (so Tq=1 sees all, and a prefill of Tq rows is causal); without it
        (cross-attention) every row sees all ``length`` positions. ``scale`` defaults to 1/sqrt(dh).
        On the GPU the keys are split into blocks, each block reduced to a partial (max, sum,
        weighted V) and a ``combine`` step merges them, so that one query over 1500 encoder
        positions still fills the GPU; a ``Position`` length (a decoder's own tokens) gets one
        workgroup per head and row that walks every key, since the blocks can't be counted when
        recording.
        """


# ---- Whisper's decoding operations ------------------------------------------------------------------


@dataclass(frozen=True)
class WhisperRules:
    """What Whisper's greedy token selection needs to know of a vocabulary (see ``WhisperOps.whisper_select``).

    ``suppress``: ids never chosen (the model's suppress_tokens and every control token between EOT
    and the timestamps). ``begin_suppress``: ids not chosen at the first step (a bare space, EOT).
    Ids from ``timestamp_begin`` up are timestamps, 20 ms apart; ``max_initial_timestamp`` is the
    index (from ``timestamp_begin``) of the latest timestamp allowed as the first token.
    ``timestamps`` False suppresses every timestamp instead of applying the timestamp rules.
    Frozen and hashable, so a backend can upload its masks once per distinct set of rules.
    """

    n_vocab: int
    eot: int
    timestamp_begin: int
    suppress: tuple[int, ...]
    begin_suppress: tuple[int, ...]
    timestamps: bool
    max_initial_timestamp: int


class WhisperSelection(Protocol):
    """A greedy selection over one window (``WhisperOps.whisper_selection``): its rules and room, and
    on the backend the tokens chosen so far, which only ``read_whisper_selection`` reads."""

    @property
    def rules(self) -> WhisperRules: ...

    @property
    def capacity(self) -> int: ...


class WhisperOps(abc.ABC):
    """Whisper's own operations: its log-mel's normalisation and its greedy token selection, which
    only ``engine.whisper`` calls. Apart from ``Ops`` so that the contract every family uses says
    nothing of one family's rules; every backend implements both (``Backend``)."""

    decode_steps_per_read: int = 1
    """Decoder steps to record between read-backs of a ``whisper_selection``
    (``engine.whisper.decode.sample_greedy``): 1 where reading is free, more where each read-back is
    a round trip to a GPU."""

    @abc.abstractmethod
    def whisper_log_mel(self, mel: Tensor, frames: int) -> Tensor:
        """Whisper's normalised log-mel [frames, n_mels] from the mel power of its first rows, mel:
        [F <= frames, n_mels] (the frames with sound; the rest are silence, power 0): ``v =
        log10(max(mel, 1e-10))``, each value clamped to at least ``top - 8``, then ``(v + 4) / 4``,
        where ``top`` is the largest v, and at least -10 (silence's v) when F < frames."""

    @abc.abstractmethod
    def whisper_selection(self, rules: WhisperRules, capacity: int) -> WhisperSelection:
        """A new greedy selection over one window: room for ``capacity`` chosen tokens (EOT included),
        none chosen yet. It owns the ids tensor [1] that ``whisper_select`` writes."""

    @abc.abstractmethod
    def whisper_select(self, logits: Tensor, selection: WhisperSelection) -> Tensor:
        """Choose the next token from logits [1, n_vocab] under Whisper's rules; return ids [1].

        The returned tensor is the selection's own ids tensor, the same one at every call, so that
        the next step's ``embed`` reads the choice on the backend. With ``h`` the tokens chosen so
        far (``n`` of them, the prompt and SOT sequence excluded), a token is allowed unless:

        * it is in ``rules.suppress``, or ``n == 0`` and it is in ``rules.begin_suppress``;
        * ``rules.timestamps`` is False and it is a timestamp;
        * timestamp rules (OpenAI's ApplyTimestampRules), when ``rules.timestamps``:
          if ``h[-1]`` is a timestamp and so is ``h[-2]`` (or ``n == 1``), no timestamp; if ``h[-1]``
          is a timestamp and ``h[-2]`` is not, no text below EOT; a timestamp below the last chosen
          one, or equal to it unless ``h[-1]`` is that timestamp and ``h[-2]`` is not; at ``n == 0``
          no text and no timestamp past ``timestamp_begin + max_initial_timestamp``.

        Then, if the log-sum-exp of the allowed timestamps' log-probabilities exceeds the largest
        allowed text (non-timestamp) log-probability, text is disallowed too. The choice is the
        largest allowed logit (first index on ties); its log-probability, under a softmax over the
        allowed tokens only, is recorded with it. Once EOT was chosen, or ``capacity`` tokens,
        every further call leaves the history alone and writes EOT to the ids (so steps recorded
        past the end are harmless).
        """

    @abc.abstractmethod
    def read_whisper_selection(self, selection: WhisperSelection) -> tuple[np.ndarray, np.ndarray]:
        """The tokens chosen so far, uint32 [n], and their log-probabilities, float64 [n], in order;
        the last token is EOT if it was chosen. Submits pending GPU work and waits for it."""

    def read_whisper_selection_later(self, selection: WhisperSelection) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """``read_whisper_selection`` as of now, given by the function returned (see ``Ops.read_later``)."""
        value = self.read_whisper_selection(selection)
        return lambda: value


class Backend(Ops, WhisperOps):
    """A compute backend: the operations of every family (``Ops``) and Whisper's (``WhisperOps``).
    ``engine.backend.make_ops`` opens one; a family's model takes the contract it calls."""
