"""Decoder heads of the Conformer families and their greedy searches: TDT, RNN-T and CTC.

The encoder-side projection (the joint's ``enc`` linear, or the CTC head) is one GEMM over all
frames on the backend. On the numpy backend the transducer's search then runs here on the host, one
small step at a time, as transcribe.cpp does: an LSTM step and a joint are a few hundred thousand
multiply-adds, and the search branches on every step. A backend that searches itself
(``Ops.searches_on_backend``, a GPU, where each host step would wait on a read-back) gets
``search.BackendTransducerHead`` instead, which follows these rules step for step.

Tensors (the same names in Parakeet and GigaAM files): ``pred.embed.weight`` [V, H] (V = vocabulary
+ blank), ``pred.lstm.{i}.Wx``/``.Wh`` [4H, H] and ``.bias`` [4H] (PyTorch gate order i, f, g, o; the
two PyTorch biases already summed), ``joint.enc`` [J, d], ``joint.pred`` [J, H], ``joint.out``
[V + n_durations, J]; ``head.ctc.weight`` [V, d, 1], ``head.ctc.bias`` [V]. The blank is the last
token of the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sayso.engine.conformer.emission import Emission
from sayso.engine.conformer.search import BackendTransducerHead, load_backend_transducer
from sayso.engine.conformer.weights import Linear, linear
from sayso.engine.cpu.ops import JOINT_FUNCTIONS, sigmoid
from sayso.engine.errors import ModelFileError, require_finite
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import JOINT_ACTIVATIONS, Ops, Tensor

def _softmax_probability(logits: np.ndarray, index: int) -> float:
    shifted = logits.astype(np.float64) - logits.max()
    return float(np.exp(shifted[index]) / np.exp(shifted).sum())


@dataclass
class LstmLayer:
    wx: np.ndarray  # [4H, in]
    wh: np.ndarray  # [4H, H]
    bias: np.ndarray  # [4H]


class Predictor:
    """The prediction network: token embedding into stacked LSTM layers. ``step(-1, ...)`` is the
    start (an all-zero input, with the all-zero initial state)."""

    def __init__(self, embed: np.ndarray, layers: list[LstmLayer]):
        self.embed = embed
        self.layers = layers
        self.hidden = embed.shape[1]

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(h, c), each [layers, H]."""
        zeros = np.zeros((len(self.layers), self.hidden), np.float32)
        return zeros, zeros.copy()

    def step(self, token: int, state: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Feed the last emitted token: returns the top layer's output [H] and the new state."""
        h_prev, c_prev = state
        x = np.zeros(self.hidden, np.float32) if token < 0 else self.embed[token]
        h_new, c_new = np.empty_like(h_prev), np.empty_like(c_prev)
        for i, layer in enumerate(self.layers):
            gates = layer.wx @ x + layer.wh @ h_prev[i] + layer.bias
            i_gate, f_gate, g_gate, o_gate = np.split(gates, 4)
            c_new[i] = sigmoid(f_gate) * c_prev[i] + sigmoid(i_gate) * np.tanh(g_gate)
            h_new[i] = sigmoid(o_gate) * np.tanh(c_new[i])
            x = h_new[i]
        return x, (h_new, c_new)


@dataclass
class TransducerHead:
    """Predictor + joint, searched greedily: TDT when ``durations`` is given, else RNN-T.

    ``max_symbols``: after this many tokens on one frame without moving on, the search moves on by
    one frame (0: no limit for RNN-T; for TDT a blank of duration 0 then still moves on by one, where
    transcribe.cpp would loop to its iteration cap and fail).
    """

    encoder_projection: Linear  # joint.enc on the backend: [J, d]
    predictor: Predictor
    pred_weight: np.ndarray  # joint.pred [J, H]
    pred_bias: np.ndarray  # [J]
    out_weight: np.ndarray  # joint.out [V (+ durations), J]
    out_bias: np.ndarray
    activation: str
    blank: int
    durations: list[int] | None
    max_symbols: int

    def decode(self, ops: Ops, encoded: Tensor) -> list[Emission]:
        """Greedy search over encoder states [T, d] (a backend tensor)."""
        projected = ops.read(ops.gemm(encoded, self.encoder_projection.weight, self.encoder_projection.bias))
        return self.search(require_finite(projected, "encoder's states"))

    def search(self, projected: np.ndarray) -> list[Emission]:
        """Greedy search over the joint's encoder projections [T, J] (float32, host)."""
        if self.durations is None:
            return self._rnnt(projected)
        return self._tdt(projected)

    def _joint(self, frame: np.ndarray, prediction: np.ndarray) -> np.ndarray:
        hidden = JOINT_FUNCTIONS[self.activation](frame + self.pred_weight @ prediction + self.pred_bias)
        return self.out_weight @ hidden + self.out_bias

    def _tdt(self, projected: np.ndarray) -> list[Emission]:
        n_tokens = self.blank + 1
        state = self.predictor.initial_state()
        prediction, next_state = self.predictor.step(-1, state)
        emitted: list[Emission] = []
        step, symbols = 0, 0
        while step < len(projected):
            logits = self._joint(projected[step], prediction)
            token = int(np.argmax(logits[:n_tokens]))
            duration = self.durations[int(np.argmax(logits[n_tokens:]))]
            if token != self.blank:
                emitted.append(Emission(token, step, duration, _softmax_probability(logits[:n_tokens], token)))
                state = next_state
                prediction, next_state = self.predictor.step(token, state)
            step += duration
            symbols += 1
            if duration != 0:
                symbols = 0
            elif token == self.blank or (self.max_symbols and symbols >= self.max_symbols):
                # A blank that doesn't move would repeat unchanged until the symbol limit forces a
                # step; take that step now.
                step += 1
                symbols = 0
        return emitted

    def _rnnt(self, projected: np.ndarray) -> list[Emission]:
        state = self.predictor.initial_state()
        prediction, next_state = self.predictor.step(-1, state)
        emitted: list[Emission] = []
        step, symbols = 0, 0
        while step < len(projected):
            logits = self._joint(projected[step], prediction)
            token = int(np.argmax(logits))
            if token == self.blank:
                step += 1
                symbols = 0
                continue
            emitted.append(Emission(token, step, 1, _softmax_probability(logits, token)))
            state = next_state
            prediction, next_state = self.predictor.step(token, state)
            symbols += 1
            if self.max_symbols and symbols >= self.max_symbols:
                step += 1
                symbols = 0
        return emitted


@dataclass
class CtcHead:
    """A per-frame classifier over vocabulary + blank, searched greedily: the best class of each
    frame, runs of one class collapsed, blanks dropped; a token starts at its run's first frame."""

    classifier: Linear  # [V, d] on the backend
    blank: int

    def decode(self, ops: Ops, encoded: Tensor) -> list[Emission]:
        logits = require_finite(ops.read(ops.gemm(encoded, self.classifier.weight, self.classifier.bias)), "scores")
        best = np.argmax(logits, axis=1)
        emitted, previous = [], -1
        for frame, token in enumerate(best.tolist()):
            if token != previous and token != self.blank:
                emitted.append(Emission(token, frame, 1, _softmax_probability(logits[frame], token)))
            previous = token
        return emitted


def load_transducer(model_file: ModelFile, ops: Ops, n_layers: int, activation: str, blank: int,
                    durations: list[int] | None, max_symbols: int) -> TransducerHead | BackendTransducerHead:
    """The ``pred.*`` and ``joint.*`` tensors of a transducer head: searched on the backend where it
    says so (``Ops.searches_on_backend``), else on the host."""
    if activation not in JOINT_ACTIVATIONS:
        raise ModelFileError(model_file.path, f"has a joint network with activation '{activation}', which Sayso can't run",
                             f"Supported: {', '.join(JOINT_ACTIVATIONS)}.")
    if ops.searches_on_backend:
        return load_backend_transducer(model_file, ops, n_layers, activation, blank, durations, max_symbols)
    layers = [LstmLayer(model_file.array(f"pred.lstm.{i}.Wx"), model_file.array(f"pred.lstm.{i}.Wh"),
                        model_file.array(f"pred.lstm.{i}.bias")) for i in range(n_layers)]
    return TransducerHead(
        encoder_projection=linear(model_file, ops, "joint.enc"),
        predictor=Predictor(model_file.array("pred.embed.weight"), layers),
        pred_weight=model_file.array("joint.pred.weight"),
        pred_bias=model_file.array("joint.pred.bias"),
        out_weight=model_file.array("joint.out.weight"),
        out_bias=model_file.array("joint.out.bias"),
        activation=activation,
        blank=blank,
        durations=durations,
        max_symbols=max_symbols,
    )


def load_ctc(model_file: ModelFile, ops: Ops) -> CtcHead:
    """``head.ctc.*``: the blank is its last class."""
    classifier = linear(model_file, ops, "head.ctc")
    return CtcHead(classifier, model_file.shape("head.ctc.weight")[0] - 1)
