"""Silero VAD v6's 16 kHz network in numpy, with the weights of its ONNX file.

Per window of 512 samples (32 ms) with the 64 before it as context, [576]:

    reflect-pad 64 on the right -> [640]; STFT as a strided conv (256 taps, hop 128) -> 4 frames of
    129 magnitudes; four conv1d + ReLU (kernel 3, pad 1, strides 1, 2, 2, 1; 129 -> 128 -> 64 -> 64
    -> 128 channels) -> [128]; an LSTM cell (128) carried from window to window; ReLU, a 1x1 conv
    and a sigmoid -> the probability that the window holds speech.

Everything before the LSTM depends on its own window only, so a run of windows goes through it in
batches of matrix products, and only the cell steps one window at a time (``_lstm``): several times
faster than onnxruntime running Silero's own graph once per window. That graph stays the reference
the tests compare with (tests/engine/test_vad.py). The cell's loop is numpy's, not an ONNX Runtime LSTM
node: the node steps faster, but importing ONNX Runtime for it alone raised a GPU process's peak
memory and its start. The cell as one GPU workgroup was no faster than this loop: not kept.
(docs/PERFORMANCE.md: Silero VAD in numpy.)
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from sayso.engine.cpu.ops import sigmoid
from sayso.engine.errors import ModelFileError
from sayso.engine.onnx_constants import constants

WINDOW = 512  # samples per probability
CONTEXT = 64  # samples of the previous window seen before each window
STATE_SHAPE = (2, 1, 128)  # the LSTM's (h, c), as the ONNX model takes and returns them
_BRANCH = "If_0_then_branch__Inline_0__"  # the ONNX graph's 16 kHz branch (the other is 8 kHz)
_N_FFT, _HOP = 256, 128
_STRIDES = (1, 2, 2, 1)

MODEL_FILE = "silero_vad.onnx"
"""In ``sayso.resources``: ``silero_vad/data/silero_vad.onnx`` of the ``silero-vad`` 6.2.3 wheel."""
MODEL_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"

BLOCK = 128  # windows (4 s) through the network's batched part at a time (``run``)


def model_path() -> Path:
    """Silero's ONNX file, as Sayso's package ships it."""
    import importlib.resources

    return Path(importlib.resources.files("sayso.resources")) / MODEL_FILE


class SileroModel:
    """The network with its weights; ``run`` is pure (no state of its own), so every ``Vad`` shares one."""

    _shared: SileroModel | None = None
    _lock = threading.Lock()

    def __init__(self, path: Path):
        weights = {name.removeprefix(_BRANCH): value for name, value in constants(path).items()
                   if name.startswith(_BRANCH)}  # fmt: skip
        try:
            self._load(weights)
        except (KeyError, ValueError) as error:
            raise ModelFileError(path, f"not Silero VAD v6's model ({error.__class__.__name__}: {error})") from None

    def _load(self, weights: dict[str, np.ndarray]) -> None:
        basis = weights["stft.forward_basis_buffer"]  # [258, 1, 256]: cosines then sines
        self.stft = np.ascontiguousarray(basis[:, 0, :].T)  # [256, 258]
        self.convs = []
        for i in range(4):
            w = weights[f"encoder.{i}.reparam_conv.weight"]  # [C_out, C_in, 3]
            # as one product over [frame, tap, channel] windows: rows tap-major, channels within
            flat = np.ascontiguousarray(w.transpose(2, 1, 0).reshape(-1, w.shape[0]))  # [3*C_in, C_out]
            self.convs.append((flat, weights[f"encoder.{i}.reparam_conv.bias"]))
        # PyTorch orders the cell's gates i, f, g, o; ``_lstm`` takes i, f, o (the sigmoid ones) then g,
        # with the sigmoid gates' rows halved: sigmoid(x) = (tanh(x / 2) + 1) / 2, so one tanh serves all.
        order = np.concatenate([np.arange(0, 256), np.arange(384, 512), np.arange(256, 384)])
        halve = np.concatenate([np.full(384, 0.5, np.float32), np.ones(128, np.float32)])
        rnn = {part: weights[f"decoder.rnn.{part}"] for part in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        self.w_in = np.ascontiguousarray(rnn["weight_ih"][order].T * halve)  # [128, 512]
        self.b_in = ((rnn["bias_ih"] + rnn["bias_hh"])[order] * halve).astype(np.float32)  # [512]
        # applied to 2h, the loop's own record of h (see ``_lstm``)
        self.w_rec = np.ascontiguousarray(rnn["weight_hh"][order].T * (halve * 0.5))  # [128, 512]
        self.w_out = weights["decoder.decoder.2.weight"].reshape(-1)  # [128]
        self.b_out = float(weights["decoder.decoder.2.bias"].reshape(-1)[0])

    @classmethod
    def shared(cls) -> SileroModel:
        """The process's model, loaded on first use."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls(model_path())
            return cls._shared

    def run(self, windows: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Speech probabilities [n] of ``windows`` [n, CONTEXT + WINDOW], in order, from the LSTM
        ``state`` [2, 1, 128]; returns them and the state after the last window.

        ``BLOCK`` windows at a time: a 30 s piece's windows encoded in one batch would make their
        intermediates the largest allocation a GPU transcription makes on the host, and so its peak
        memory (docs/PERFORMANCE.md: Silero VAD in numpy)."""
        if not len(windows):
            return np.zeros(0, np.float32), state
        h, c = np.asarray(state, np.float32).reshape(2, 128)
        probabilities = []
        for start in range(0, len(windows), BLOCK):
            features = self._encode(np.asarray(windows[start : start + BLOCK], np.float32))  # [block, 128]
            outputs, h, c = self._lstm(features @ self.w_in + self.b_in, h, c)
            probabilities.append(sigmoid(np.maximum(outputs, 0.0) @ self.w_out + self.b_out))
        return np.concatenate(probabilities), np.stack([h, c]).reshape(STATE_SHAPE)

    def _lstm(self, gates_in: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cell over ``gates_in`` [n >= 1, 512] (each window's input share of the gates) from h, c [128]:
        returns h of every step [n, 128], and h, c after the last.

        A step is eleven numpy calls on preallocated views (their call overhead is the step's time;
        docs/PERFORMANCE.md: Silero's LSTM step):
        one tanh over all four gates, then the sigmoid gates as tanh + 1, i.e. twice their value, which
        the loop keeps rather than halving: c takes one halving, and h is carried as 2h, which the
        halved ``w_rec`` turns back into h's share of the next gates."""
        n = len(gates_in)
        doubled = np.empty((n + 1, 128), np.float32)  # row t + 1: 2h after step t
        doubled[0] = 2 * h
        c = np.array(c, np.float32)
        gates, both = np.empty(512, np.float32), np.empty(128, np.float32)
        sigmoids, i, f, o, g = gates[:384], gates[:128], gates[128:256], gates[256:384], gates[384:]
        dot, tanh, add, mul = np.dot, np.tanh, np.add, np.multiply
        for t in range(n):
            dot(doubled[t], self.w_rec, out=gates)
            add(gates, gates_in[t], out=gates)
            tanh(gates, out=gates)
            add(sigmoids, 1.0, out=sigmoids)  # 2 sigmoid(i, f, o)
            mul(c, f, out=c)
            mul(i, g, out=both)
            add(c, both, out=c)
            mul(c, 0.5, out=c)  # c = sigmoid(f) c + sigmoid(i) g
            h2 = doubled[t + 1]
            tanh(c, out=h2)
            mul(h2, o, out=h2)  # 2h = 2 sigmoid(o) tanh(c)
        outputs = doubled[1:] * 0.5
        return outputs, outputs[-1], c

    def _encode(self, windows: np.ndarray) -> np.ndarray:
        """[n, 576] -> [n, 128]: the STFT magnitudes through the four convolutions."""
        padded = np.pad(windows, ((0, 0), (0, _N_FFT // 4)), mode="reflect")  # [n, 640]
        frames = np.lib.stride_tricks.sliding_window_view(padded, _N_FFT, axis=1)[:, ::_HOP]  # [n, 4, 256]
        # Products on 2-D views: a 3-D operand makes numpy call BLAS once per window.
        spectrum = (frames.reshape(-1, _N_FFT) @ self.stft).reshape(len(frames), -1, self.stft.shape[1])  # [n, 4, 258]
        half = spectrum.shape[-1] // 2
        x = np.sqrt(spectrum[..., :half] ** 2 + spectrum[..., half:] ** 2)  # [n, 4, 129]
        for (weight, bias), stride in zip(self.convs, _STRIDES):
            padded = np.pad(x, ((0, 0), (1, 1), (0, 0)))
            taps = np.lib.stride_tricks.sliding_window_view(padded, 3, axis=1)[:, ::stride]  # [n, T', C, 3]
            steps = taps.shape[1]
            taps = taps.transpose(0, 1, 3, 2).reshape(len(x) * steps, -1)  # [n * T', 3*C]
            x = np.maximum(taps @ weight + bias, 0.0).reshape(len(x), steps, -1)
        return x[:, 0, :]
