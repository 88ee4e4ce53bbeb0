"""Whisper's log-mel spectrogram, computed as OpenAI's ``whisper.audio`` and transformers compute it.

The window (periodic Hann, [400]) and the Slaney mel filterbank ([n_mels, 201], n_mels 80 or 128) come from
the model file (GGUF tensors ``frontend.window`` and ``frontend.mel_filterbank``), so the features match the
ones the model was trained on bit for bit in layout and within float rounding in value.

Every frame is computed on its own: one FFT row, then the mel filters as sums over each filter's few
non-zero bins (at most 14 of 201, summed in order), not as a BLAS product, whose order of additions
depends on the shape of the matrices. So a frame's value never depends on how many
frames were computed with it, which is what lets ``LogMel`` keep the frames of audio that is still
growing (a dictation being spoken) and still give, for the whole utterance, exactly the features of
one call on all of it.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.cpu.ops import in_blocks, whisper_log_mel
from sayso.engine.ops import Backend, Tensor, WeightSource

SAMPLE_RATE = 16000
HOP_LENGTH = 160  # 10 ms: one mel frame per hop; the encoder halves this to 20 ms per output position
CHUNK_SECONDS = 30
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # 480000: Whisper always sees a 30 s window
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000 mel frames per window


def pad_or_trim(pcm: np.ndarray, n_samples: int = N_SAMPLES) -> np.ndarray:
    """Cut ``pcm`` [n] to ``n_samples`` or pad it with zeros (silence) at the end; float32 [n_samples]."""
    pcm = np.asarray(pcm, dtype=np.float32)
    if pcm.shape[0] >= n_samples:
        return pcm[:n_samples]
    return np.pad(pcm, (0, n_samples - pcm.shape[0]))


def sound_padded(pcm: np.ndarray, real: int, samples: int, sound: int, half: int) -> np.ndarray:
    """What frames 0 .. sound-1 read of the first ``real`` samples of ``pcm`` in a window of
    ``samples``: the samples they cover (with at least the half that frame 0 reflects), the padding's
    zeros included, reflect-padded by ``half`` at both ends (centred frames, as torch.stft); past
    them, reflecting the end as torch.stft does can't matter. Frame t starts at t * HOP_LENGTH."""
    needed = min(samples, max((sound - 1) * HOP_LENGTH + half, half + 1))
    return reflect_padded(pcm[: min(real, needed)], needed, half)


def reflect_padded(audio: np.ndarray, length: int, half: int) -> np.ndarray:
    """``audio`` followed by zeros to ``length`` samples, then reflected ``half`` samples at each end
    as ``np.pad(..., half, mode="reflect")`` does (``half < length``), in float64. Written out: np.pad
    was a sizeable part of a log-mel (docs/PERFORMANCE.md: log-mel on the CPU)."""
    padded = np.zeros(length + 2 * half)
    padded[half : half + len(audio)] = audio
    padded[:half] = padded[2 * half : half : -1]  # padded[i] = audio[half - i]
    padded[half + length :] = padded[half + length - 2 : length - 2 : -1]  # audio[length - 2 - i]
    return padded


class LogMel:
    """Whisper's normalised log-mel features of audio that may be growing at its end.

    Call it with the audio so far. The mel power of each frame whose window lies wholly inside that audio
    is kept, and a later call with longer audio *that starts with the same samples* computes only the
    frames past them. The last few frames (their windows reach into the silence that pads the audio to
    the window) and the normalisation, whose clamp depends on the loudest frame of the whole window, are
    redone at each call. One ``LogMel`` serves one stream of audio: it doesn't check that a later call's
    audio starts as the earlier one did.
    """

    def __init__(self, filterbank: np.ndarray, window: np.ndarray):
        self.n_mels = filterbank.shape[0]
        self.window = window.astype(np.float64)  # [n_fft]
        # Each filter's non-zero bins as taps: tap j of filter f is bin ``_tap_bins[j, f]`` with weight
        # ``_tap_weights[j, f]``; a filter with fewer bins has taps of weight 0 (bin 0), which add
        # exactly nothing. Summed tap by tap, for all filters at once: several times faster than
        # np.add.reduceat over the bins (docs/PERFORMANCE.md: log-mel on the CPU).
        rows, bins = np.nonzero(filterbank)  # row-major: each filter's bins together, in order
        widths = np.bincount(rows, minlength=self.n_mels)
        tap = np.arange(len(rows)) - np.repeat(np.cumsum(widths) - widths, widths)  # index within its filter
        self._tap_bins = np.zeros((max(1, widths.max(initial=0)), self.n_mels), np.intp)
        self._tap_weights = np.zeros(self._tap_bins.shape)
        self._tap_bins[tap, rows] = bins
        self._tap_weights[tap, rows] = filterbank[rows, bins]
        self._frames = np.zeros((0, self.n_mels))  # mel power of the final frames so far [F, n_mels]

    def __call__(self, pcm: np.ndarray, n_frames: int | None = None) -> np.ndarray:
        """Features float32 [n_mels, T] of 16 kHz ``pcm`` [n], as ``log_mel`` documents."""
        pcm = np.asarray(pcm, dtype=np.float32)
        samples = pcm.shape[0] if n_frames is None else n_frames * HOP_LENGTH  # with the padding
        real = min(pcm.shape[0], samples)  # samples of real audio; any padding after them is silence
        total = samples // HOP_LENGTH
        if samples < HOP_LENGTH:
            return np.zeros((self.n_mels, 0), dtype=np.float32)
        half = self.window.shape[0] // 2
        # frames whose windows (and, for frame 0, the reflected samples 1..half) lie inside the audio
        final = max(0, min(total, (real - half - 1) // HOP_LENGTH + 1))
        kept = min(len(self._frames), final)  # audio that ends earlier than before has fewer final frames
        # Frames from ``silent`` on see only the padding's zeros, so their power is exactly 0: a short
        # dictation padded to Whisper's 30 s computes a third of the frames or fewer.
        silent = max(kept, min(total, -(-(real + half) // HOP_LENGTH)))
        padded = sound_padded(pcm, real, samples, silent, half)
        fresh = self._mel_power(padded, kept, silent)
        if final > len(self._frames):
            self._frames = np.concatenate([self._frames, fresh[: final - kept]])
        mel = np.concatenate([self._frames[:kept], fresh])  # [silent, n_mels]: the frames with sound
        return whisper_log_mel(mel, total).T  # time-major [total, n_mels]: the layout the encoder reads

    def _mel_power(self, padded: np.ndarray, first: int, end: int) -> np.ndarray:
        """Mel power [end - first, n_mels] of frames first .. end-1 of the reflect-padded audio.

        The FFT runs in float64, like transformers' numpy path, so that the log of small powers agrees with
        the reference to well under 1e-4. Blocks of frames go to the cores at once (numpy lets go of the
        GIL in each step); a frame's value doesn't depend on its block.
        """
        n_fft = self.window.shape[0]
        mel = np.empty((max(0, end - first), self.n_mels))
        if end <= first:
            return mel
        segment = padded[first * HOP_LENGTH : (end - 1) * HOP_LENGTH + n_fft]
        frames = np.lib.stride_tricks.sliding_window_view(segment, n_fft)[::HOP_LENGTH]  # a view, no copy

        def block(rows: slice) -> None:
            spectrum = np.fft.rfft(frames[rows] * self.window, axis=-1)
            power = spectrum.real**2 + spectrum.imag**2  # [frames, n_fft // 2 + 1]
            out = mel[rows]
            np.multiply(power[:, self._tap_bins[0]], self._tap_weights[0], out=out)
            for bins, weights in zip(self._tap_bins[1:], self._tap_weights[1:]):
                out += power[:, bins] * weights

        in_blocks(len(mel), mel.size, block)
        return mel


class BackendLogMel:
    """Whisper's normalised log-mel computed by a backend's ops (``Ops.features_on_backend``: a GPU): the
    frames as rows of ``im2col``, the windowed DFT as a product with a [2 * bins, n_fft] matrix of cosines
    and sines whose squares (``act="square"``) the [fb, fb] filterbank sums into mel power, then
    ``whisper_log_mel``. Only the reflect-padded audio of the frames with sound goes up, and the features
    stay on the backend for the encoder. The products run in float32 where ``LogMel``'s FFT runs in float64,
    so the features differ from it within float32's rounding (docs/PERFORMANCE.md: log-mel on the GPU). It
    keeps no frames: each call computes a whole window, which costs a GPU less than ``LogMel``'s bookkeeping
    costs the CPU.
    """

    def __init__(self, ops: Backend, filterbank: np.ndarray, window: np.ndarray):
        self.ops = ops
        self.n_fft = window.shape[0]
        bins = self.n_fft // 2 + 1
        turns = np.arange(bins)[:, None] * np.arange(self.n_fft)[None, :] / self.n_fft
        dft = np.concatenate([np.cos(2 * np.pi * turns), np.sin(2 * np.pi * turns)]) * window.astype(np.float64)
        twice = np.concatenate([filterbank, filterbank], axis=1)  # [n_mels, 2 * bins]: real and imaginary parts
        self.dft = ops.weight(WeightSource("frontend.dft", "F32", dft.shape, dft.astype(np.float32)))
        self.filters = ops.weight(WeightSource("frontend.mel_filters", "F32", twice.shape, twice.astype(np.float32)))

    def __call__(self, pcm: np.ndarray, n_frames: int) -> Tensor:
        """Features [n_frames, n_mels] (time-major, on the backend) of 16 kHz ``pcm``, padded with
        silence or cut to ``n_frames * 160`` samples, as ``log_mel(pcm, ..., n_frames)`` gives them
        (transposed)."""
        ops, half = self.ops, self.n_fft // 2
        samples = n_frames * HOP_LENGTH
        real = min(pcm.shape[0], samples)
        sound = min(n_frames, -(-(real + half) // HOP_LENGTH))  # frames that see a sample of audio
        padded = sound_padded(pcm, real, samples, sound, half)[: (sound - 1) * HOP_LENGTH + self.n_fft]
        frames = ops.im2col(ops.tensor(padded[:, None]), self.n_fft, HOP_LENGTH, 0)  # [sound, n_fft]
        power = ops.gemm(ops.gemm(frames, self.dft, act="square"), self.filters)  # [sound, n_mels]
        return ops.whisper_log_mel(power, n_frames)


def log_mel(
    pcm: np.ndarray, filterbank: np.ndarray, window: np.ndarray, n_frames: int | None = None
) -> np.ndarray:
    """Whisper's normalised log-mel features, float32 [n_mels, T].

    ``pcm``: 16 kHz mono float [n]. ``filterbank``: [n_mels, n_fft // 2 + 1]. ``window``: [n_fft].
    With ``n_frames`` the audio is first padded with silence or cut to ``n_frames * 160`` samples, so
    ``log_mel(pcm, fb, w, n_frames=3000)`` equals ``log_mel(pad_or_trim(pcm), fb, w)`` (what the encoder
    takes); without it T = n // 160. Frames are centred (the signal is reflect-padded by n_fft/2 on both
    sides) and hop 160 samples, as ``torch.stft(center=True, pad_mode="reflect")``, the last one dropped
    as Whisper drops it.

    The dynamic range is clamped to 8 (log10 units) below the loudest value of *this* input, so pass the
    whole 30 s window the model will see: the clamp, and so the features, depend on it.
    """
    return LogMel(filterbank, window)(pcm, n_frames)
