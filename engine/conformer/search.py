"""A transducer's greedy search (TDT or RNN-T) on the backend, for backends where a step on the host
would wait on a read-back (``Ops.searches_on_backend``: a GPU).

The rules are ``heads.TransducerHead``'s, step for step; here every step is recorded as the same
dispatches, reading the search's position from a state tensor (``Ops.transducer_state``), so that
steps run in batches of ``Ops.search_steps_per_read`` without the host and a batch's recording is
replayed. A step: the joint's predictor projection and hidden layer at the state's frame, its output
layer, the choice (``Ops.transducer_choose``: the token, the duration, the next frame), then the
predictor takes the emitted token's embedding, which changes its LSTM state only where the step
emitted one (``Ops.lstm_cell``). The host reads the state's first words after each batch, to know
when the frames are done, and the emissions once at the end.

Tensors are ``heads``'s; the predictor and joint weights stay in their GGUF type on the backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sayso.engine.conformer.emission import Emission
from sayso.engine.conformer.weights import linear, matrix_source
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.layers import Linear
from sayso.engine.ops import TRANSDUCER_HEADER, Ops, Tensor, Weight, WeightSource

SYMBOLS_WITHOUT_LIMIT = 16
"""Tokens per frame the state holds room for when the head sets no per-frame limit (an RNN-T with
``max_symbols`` 0): a search that fills it ends there."""
READ_WORDS = 1016
"""State words per read-back of the emissions: each read stays a small one (``recorder.SMALL_READ``)."""


@dataclass
class BackendLstmLayer:
    wx: Weight  # [4H, in]
    wh: Weight  # [4H, H]
    bias: Tensor  # [4H]


@dataclass
class BackendTransducerHead:
    """Predictor + joint on the backend, searched greedily there: TDT when ``durations`` is given."""

    encoder_projection: Linear  # joint.enc: [J, d]
    embed: Weight | None  # pred.embed: [V, H]; None where ``input_gates`` stands for it
    layers: list[BackendLstmLayer]
    input_gates: Weight | None  # [V, 4H]: the first layer's input gates per token (see load_backend_transducer)
    hidden: int  # H
    joint_pred: Linear  # [J, H]
    joint_out: Linear  # [V (+ durations), J]
    activation: str
    blank: int
    durations: Tensor | None  # uint32 [D]
    max_symbols: int

    def decode(self, ops: Ops, encoded: Tensor) -> list[Emission]:
        """Greedy search over encoder states [T, d] (a backend tensor)."""
        projected = ops.gemm(encoded, self.encoder_projection.weight, self.encoder_projection.bias)
        frames = projected.shape[0]
        if frames == 0:
            return []
        state = ops.transducer_state(frames * (self.max_symbols or SYMBOLS_WITHOUT_LIMIT))
        ids = ops.ids(np.zeros(1, np.uint32))
        zeros = np.zeros((1, self.hidden), np.float32)
        cells = [ops.tensor(zeros) for _ in self.layers]
        outputs = [ops.tensor(zeros) for _ in self.layers]
        self._predict(ops, state, cells, outputs, x=ops.tensor(zeros))  # the start: an all-zero input

        def step() -> None:
            prediction = ops.gemv(outputs[-1], self.joint_pred.weight, self.joint_pred.bias)
            hidden = ops.joint_hidden(projected, prediction, state, self.activation)
            logits = ops.gemv(hidden, self.joint_out.weight, self.joint_out.bias)
            ops.transducer_choose(logits, self.durations, state, ids, frames, self.blank + 1, self.max_symbols)
            self._predict(ops, state, cells, outputs, ids=ids)

        steps = ops.search_steps_per_read
        batch = ops.repeatable(lambda: [step() for _ in range(steps)])
        last = None
        while True:  # each batch's header is read while the next batch is recorded and runs
            batch()
            header = ops.read_later(ops.columns(state, 0, TRANSDUCER_HEADER))
            if last is not None:
                words = last()
                if words[0, 0] >= frames:
                    break
            last = header
        count = int(words[0, 2])
        reads = [ops.read_later(ops.columns(state, TRANSDUCER_HEADER + start,
                                            TRANSDUCER_HEADER + min(4 * count, start + READ_WORDS)))
                 for start in range(0, 4 * count, READ_WORDS)]
        emitted = np.concatenate([read()[0] for read in reads]) if reads else np.zeros(0, np.uint32)
        records = emitted.reshape(count, 4)
        probabilities = records[:, 3].copy().view(np.float32)
        return [Emission(int(token), int(frame), int(duration), float(probability))
                for (token, frame, duration, _), probability in zip(records.tolist(), probabilities)]

    def _predict(self, ops: Ops, state: Tensor, cells: list[Tensor], outputs: list[Tensor], x: Tensor | None = None,
                 ids: Tensor | None = None) -> None:
        """The LSTM layers on input x [1, H], or on the embedding of token ``ids`` [1], updating ``cells``
        and ``outputs`` where the state says."""
        looked_up = None  # the first layer's x·Wxᵀ + bias, looked up by lstm_cell
        if ids is not None and self.input_gates is not None:
            looked_up = (self.input_gates, ids)
        elif ids is not None:
            x = ops.embed(ids, self.embed, None, 0)
        for layer, c, h in zip(self.layers, cells, outputs):
            if looked_up is None:
                gates = ops.gemv(h, layer.wh, residual=ops.gemv(x, layer.wx, layer.bias))
            else:
                gates = ops.gemv(h, layer.wh)
            ops.lstm_cell(gates, state, c, h, looked_up)
            x, looked_up = h, None


def load_backend_transducer(model_file: ModelFile, ops: Ops, n_layers: int, activation: str, blank: int,
                            durations: list[int] | None, max_symbols: int) -> BackendTransducerHead:
    """``heads.load_transducer``'s tensors as backend weights.

    Where the vocabulary is smaller than the embedding (GigaAM's 34 characters), the first LSTM layer's
    input gates of every token (embedding · Wxᵀ + bias, [V, 4H]) are computed here once, a table smaller
    than Wx: a step's cell update then adds its token's row (``Ops.lstm_cell``'s ``input_gates``)
    instead of embedding the token and multiplying, two dispatches fewer in a search whose steps are
    bound by their dispatches (docs/PERFORMANCE.md: transducer step dispatches). A large
    vocabulary (Parakeet's 8193) would make the table many times Wx's size and the load slower."""
    vocabulary, width = model_file.shape("pred.embed.weight")
    embed = input_gates = None
    if vocabulary < width:  # the embedding is then read only here, into the table
        table = (model_file.array("pred.embed.weight") @ model_file.array("pred.lstm.0.Wx").T
                 + model_file.array("pred.lstm.0.bias")).astype(np.float32)
        input_gates = ops.weight(WeightSource("pred.input_gates", "F32", table.shape, table))
    else:
        embed = ops.weight(matrix_source(model_file, "pred.embed.weight"))
    layers = [BackendLstmLayer(ops.weight(matrix_source(model_file, f"pred.lstm.{i}.Wx")),
                               ops.weight(matrix_source(model_file, f"pred.lstm.{i}.Wh")),
                               ops.tensor(model_file.array(f"pred.lstm.{i}.bias")))
              for i in range(n_layers)]
    return BackendTransducerHead(
        encoder_projection=linear(model_file, ops, "joint.enc"),
        embed=embed,
        layers=layers,
        input_gates=input_gates,
        hidden=width,
        joint_pred=linear(model_file, ops, "joint.pred"),
        joint_out=linear(model_file, ops, "joint.out"),
        activation=activation,
        blank=blank,
        durations=ops.ids(np.array(durations, np.uint32)) if durations else None,
        max_symbols=max_symbols,
    )
