"""Silero VAD v6's 16 kHz network in numpy, with the weights of its ONNX file.

Per window of 512 samples (32 ms) with the 64 before it as context, [576]:

    reflect-pad 64 on the right -> [640]; STFT as a strided conv (256 taps, hop 128) -> 4 frames of
    129 magnitudes; four conv1d + ReLU (kernel 3, pad 1, strides 1, 2, 2, 1; 129 -> 128 -> 64 -> 64
    -> 128 channels) -> [128]; an LSTM cell (128) carried from window to window; ReLU, a 1x1 conv
    and a sigmoid -> the probability that the window holds speech.

Everything before the LSTM depends on its own window only, so a run of windows goes through it as one
batch of matrix products, and only the cell steps one window at a time, in one ONNX Runtime LSTM node
(``engine.onnx_graph``; the same loop in Python took 12 ms for 11 s of audio). 11 s (344 windows)
take ~8 ms, where onnxruntime running Silero's own graph, called once per window, took 40. That
graph stays the reference the tests compare with (tests/test_vad.py).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from engine import onnx_graph
from engine.cpu.ops import sigmoid
from engine.errors import ModelFileError
from engine.onnx_constants import constants

WINDOW = 512  # samples per probability
CONTEXT = 64  # samples of the previous window seen before each window
STATE_SHAPE = (2, 1, 128)  # the LSTM's (h, c), as the ONNX model takes and returns them
_BRANCH = "If_0_then_branch__Inline_0__"  # the ONNX graph's 16 kHz branch (the other is 8 kHz)
_N_FFT, _HOP = 256, 128
_STRIDES = (1, 2, 2, 1)


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
        # PyTorch orders the cell's gates i, f, g, o; ONNX's LSTM takes i, o, f, g.
        order = np.concatenate([np.arange(0, 128), np.arange(384, 512), np.arange(128, 384)])
        rnn = {part: weights[f"decoder.rnn.{part}"] for part in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        self.lstm = onnx_graph.session(onnx_graph.Node(
            "LSTM", ["x", "w", "r", "b", "", "h0", "c0"],
            {"x": ("n", 1, 128), "h0": (1, 1, 128), "c0": (1, 1, 128)},
            weights={"w": rnn["weight_ih"][order][None], "r": rnn["weight_hh"][order][None],
                     "b": np.concatenate([rnn["bias_ih"][order], rnn["bias_hh"][order]])[None]},
            outputs={"y": ("n", 1, 1, 128), "h": (1, 1, 128), "c": (1, 1, 128)},
            attributes={"hidden_size": 128},
        ), threads=1)  # one step at a time: more threads would only hand the step around
        self.w_out = weights["decoder.decoder.2.weight"].reshape(-1)  # [128]
        self.b_out = float(weights["decoder.decoder.2.bias"].reshape(-1)[0])

    @classmethod
    def shared(cls, progress=None) -> SileroModel:
        """The process's model, loaded (and if need be fetched) on first use."""
        from engine.vad import model_path

        with cls._lock:
            if cls._shared is None:
                cls._shared = cls(model_path(progress))
            return cls._shared

    def run(self, windows: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Speech probabilities [n] of ``windows`` [n, CONTEXT + WINDOW], in order, from the LSTM
        ``state`` [2, 1, 128]; returns them and the state after the last window."""
        if not len(windows):
            return np.zeros(0, np.float32), state
        features = self._encode(np.asarray(windows, np.float32))  # [n, 128]
        state = np.asarray(state, np.float32)
        outputs, h, c = self.lstm.run(None, {"x": features[:, None, :], "h0": state[:1], "c0": state[1:]})
        probabilities = sigmoid(np.maximum(outputs[:, 0, 0, :], 0.0) @ self.w_out + self.b_out)
        return probabilities, np.concatenate([h, c])

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
