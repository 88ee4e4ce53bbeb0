"""Moonshine's encoder and decoder, written once against ``engine.ops.Ops`` so they run on any backend.

Weights come from a GGUF file in transcribe.cpp's layout (``enc.*``, ``dec.*`` tensors, ``stt.moonshine.*``
keys). Moonshine reads the raw waveform: its frontend is a convolution stem (strides 64, 3, 2), so audio
of any length becomes about n / 384 encoder positions (one per 24 ms), with no padding to a fixed
window. Positions enter through rotary embeddings on part of each head, in the encoder and in the
decoder's self-attention (interleaved pairs, as the original Keras model turned them).

Shapes: the encoder maps pcm [n] (16 kHz) to states [T, d]; the decoder maps token ids to logits [vocab]
for the last one. The model code does no arithmetic of its own on activations: every step is an ``ops``
call, and numpy only touches data where it enters (pcm) or leaves (logits read back for the sampler).

The stem's first convolution (kernel 127, stride 64, no padding) sees each row's 127 samples and nothing
else, so its rows are final as soon as their samples have arrived: ``Stem`` keeps them while a dictation
is being spoken. Everything after it is not: the GroupNorm that follows normalises over the whole
utterance, and the encoder's attention is not causal, so they run again on each pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sayso.engine.errors import ModelFileError, check_interrupt
from sayso.engine.layers import (Attention, Linear, NormedRow, apply, conv, decoder_block, encoder_block, layer_norm,
                                 norm_weight, vector)
from sayso.engine.ops import KVCache, Ops, Tensor

LAYER_NORM_EPS = 1e-5  # PyTorch's nn.LayerNorm default, which Moonshine was trained with
STEM_KERNELS = (127, 7, 3)
STEM_STRIDES = (64, 3, 2)
STEM_BLOCK = 256
"""Rows of the first stem convolution computed together (1 s of audio): every block is a product of the
same shape, so that a row's value doesn't depend on how many rows were computed with it (BLAS picks its
kernels, and so its order of additions, by the shape of a product)."""


def encoder_length(n_samples: int) -> int:
    """Encoder positions for ``n_samples`` of audio (0 when too short for the stem's kernels)."""
    t = n_samples
    for kernel, stride in zip(STEM_KERNELS, STEM_STRIDES):
        if t < kernel:
            return 0
        t = (t - kernel) // stride + 1
    return t


MIN_SAMPLES = next(n for n in range(1, 4096) if encoder_length(n) > 0)
"""The shortest audio the stem turns into at least one position (895 samples, 56 ms)."""


@dataclass(frozen=True)
class MoonshineConfig:
    """Hyperparameters and special token ids from the ``stt.moonshine.*`` keys of the model file."""

    d_model: int
    ffn_dim: int
    n_encoder_layers: int
    n_encoder_heads: int
    n_decoder_layers: int
    n_decoder_heads: int
    n_vocab: int
    max_positions: int  # decoder positions, the start token included (194)
    rotary_dims: int  # per head, the leading dims that turn; the rest pass through
    rope_theta: float
    groupnorm_eps: float
    decoder_start: int
    eos: int

    @classmethod
    def from_model_file(cls, model_file) -> MoonshineConfig:
        def key(name: str):
            return model_file.require(f"stt.moonshine.{name}")

        def refuse(problem: str) -> ModelFileError:
            return ModelFileError(model_file.path, problem, "Use a Moonshine tiny or base file.")

        for stack in ("encoder", "decoder"):
            if int(key(f"{stack}.n_kv_heads")) != int(key(f"{stack}.n_heads")):
                raise refuse(f"has grouped key/value heads in its {stack}, which this engine doesn't run")
        if int(key("encoder.d_model")) != int(key("decoder.d_model")):
            raise refuse("has an encoder and a decoder of different widths")
        if (str(key("encoder.activation")), str(key("decoder.activation"))) != ("gelu", "silu"):
            raise refuse("has activations other than Moonshine's GELU encoder and SwiGLU decoder")
        if bool(key("attention_bias")) or not bool(key("decoder.tie_word_embeddings")):
            raise refuse("has attention biases or a separate output projection")
        stem = (tuple(int(k) for k in key("conv_stem.kernel_sizes")), tuple(int(s) for s in key("conv_stem.strides")))
        if stem != (STEM_KERNELS, STEM_STRIDES) or int(key("conv_stem.groupnorm_num_groups")) != 1:
            raise refuse(f"has a convolution stem {stem} other than Moonshine's")
        if model_file.get("stt.frontend.type") != "raw" or int(model_file.get("stt.frontend.sample_rate", 0)) != 16000:
            raise refuse("doesn't take raw 16 kHz audio")
        d_model, heads = int(key("decoder.d_model")), int(key("decoder.n_heads"))
        # the factor is float32 in the file: nudged so that e.g. 0.9 * 40 still gives 36, as in float64
        rotary_dims = int(d_model // heads * float(key("partial_rotary_factor")) + 1e-4)
        return cls(
            d_model=d_model,
            ffn_dim=int(key("decoder.ffn_dim")),
            n_encoder_layers=int(key("encoder.n_layers")),
            n_encoder_heads=int(key("encoder.n_heads")),
            n_decoder_layers=int(key("decoder.n_layers")),
            n_decoder_heads=heads,
            n_vocab=int(key("decoder.vocab_size")),
            max_positions=int(key("decoder.max_position_embeddings")),
            rotary_dims=rotary_dims,
            rope_theta=float(key("rope_theta")),
            groupnorm_eps=float(key("conv_stem.groupnorm_eps")),
            decoder_start=int(key("decoder_start_token_id")),
            eos=int(key("eos_token_id")),
        )


@dataclass
class EncoderOutput:
    """One encoded utterance: ``states`` [T, d] and, per decoder layer, a KV cache of that layer's
    cross-attention keys and values of the states (computed once, read at every decoder step)."""

    states: Tensor
    cross_caches: list[KVCache]

    @property
    def length(self) -> int:
        return self.states.shape[0]


@dataclass
class DecoderState:
    """One decoding: per-layer self-attention KV caches filled up to ``position``."""

    encoder_output: EncoderOutput
    self_caches: list[KVCache]
    position: int = 0


class MoonshineModel:
    """Moonshine's weights on a backend, with ``encode`` and an incremental ``decode_step``."""

    def __init__(self, model_file, ops: Ops):
        self.ops = ops
        self.config = c = MoonshineConfig.from_model_file(model_file)
        self.stem = [conv(model_file, ops, f"enc.conv.{i}", bias=i > 0) for i in range(3)]
        self.stem_norm = tuple(vector(model_file, ops, f"enc.conv.norm.{part}") for part in ("weight", "bias"))
        self.enc_blocks = [encoder_block(model_file, ops, f"enc.blocks.{i}", norm_weight)
                           for i in range(c.n_encoder_layers)]
        self.enc_final_norm = norm_weight(model_file, ops, "enc.final_norm")
        # [n_vocab, d]: the embedding table, and (tied) the output projection that makes logits
        self.token_embedding = ops.weight(model_file.tensor("dec.token_embd.weight"))
        self.unembed = Linear(self.token_embedding, None)  # logits: the table, tied, as a layer
        self.dec_blocks = [decoder_block(model_file, ops, f"dec.blocks.{i}", norm_weight)
                           for i in range(c.n_decoder_layers)]
        self.dec_final_norm = norm_weight(model_file, ops, "dec.final_norm")

    # ---- building blocks ----------------------------------------------------------------------------

    def _apply(self, x: Tensor, linear: Linear, act: str = "none", residual: Tensor | None = None) -> Tensor:
        return apply(self.ops, x, linear, act, residual)

    def _norm(self, x: Tensor, weight: Tensor) -> Tensor | NormedRow:
        """Bias-less LayerNorm of ``x`` for ``_apply``; a decoder step's single row is normalised by the
        products that read it (``engine.layers.NormedRow``)."""
        return layer_norm(self.ops, x, weight, None, LAYER_NORM_EPS)

    def _rotate(self, x: Tensor, n_heads: int, pos0: int) -> Tensor:
        c = self.config
        return self.ops.rotary(x, n_heads, c.rotary_dims, c.rope_theta, pos0, interleaved=True)

    # ---- encoder ------------------------------------------------------------------------------------

    def encode(self, pcm: np.ndarray, stem: Stem | None = None, interrupt=None) -> EncoderOutput:
        """Encode one utterance: pcm float32 [n] at 16 kHz, at least ``MIN_SAMPLES`` long. ``stem``: the
        first convolution's rows kept from earlier, shorter audio that this audio continues.
        ``interrupt``: a ``threading.Event`` looked at before each block (``errors.Interrupted``)."""
        ops, c = self.ops, self.config
        pcm = np.asarray(pcm, np.float32).reshape(-1)
        if len(pcm) < MIN_SAMPLES:
            raise ValueError(f"Moonshine needs at least {MIN_SAMPLES} samples of audio, got {len(pcm)}")
        x = ops.tensor((stem or Stem(self))(pcm))  # [T0, d]: tanh(conv0), one row per 4 ms
        _, conv1, conv2 = self.stem
        x = ops.group_norm(x, 1, *self.stem_norm, eps=c.groupnorm_eps)
        x = ops.gemm(ops.im2col(x, STEM_KERNELS[1], STEM_STRIDES[1], 0), conv1.weight, conv1.bias, act="gelu")
        x = ops.gemm(ops.im2col(x, STEM_KERNELS[2], STEM_STRIDES[2], 0), conv2.weight, conv2.bias, act="gelu")
        for block in self.enc_blocks:  # x: [T, d]
            check_interrupt(interrupt)
            h = self._norm(x, block.norm_attn)
            attn = block.attn
            q = self._rotate(self._apply(h, attn.q), c.n_encoder_heads, 0)
            k = self._rotate(self._apply(h, attn.k), c.n_encoder_heads, 0)
            x = self._apply(ops.attention(q, k, self._apply(h, attn.v), c.n_encoder_heads), attn.out, residual=x)
            hidden = self._apply(self._norm(x, block.norm_ffn), block.fc1, act="gelu")
            x = self._apply(hidden, block.fc2, residual=x)
        states = ops.layer_norm(x, self.enc_final_norm, None, LAYER_NORM_EPS)  # a tensor, even of one row
        return EncoderOutput(states, [self._cross_cache(states, block.cross_attn) for block in self.dec_blocks])

    def _cross_cache(self, states: Tensor, attn: Attention) -> KVCache:
        c = self.config
        cache = self.ops.kv_cache(c.n_decoder_heads, c.d_model // c.n_decoder_heads, states.shape[0])
        self.ops.kv_pack(cache, self._apply(states, attn.k), self._apply(states, attn.v), 0)
        return cache

    # ---- decoder ------------------------------------------------------------------------------------

    def decoder_session(self, encoder_output: EncoderOutput) -> DecoderState:
        """Empty self-attention caches (``max_positions`` each) over one encoded utterance."""
        c = self.config
        caches = [self.ops.kv_cache(c.n_decoder_heads, c.d_model // c.n_decoder_heads, c.max_positions)
                  for _ in range(c.n_decoder_layers)]  # fmt: skip
        return DecoderState(encoder_output, caches)

    def decode_step(self, state: DecoderState, token_id: int) -> np.ndarray:
        """Feed one token at the state's position; return float32 logits [n_vocab] for the next one."""
        return self.ops.read(self.step_logits(state, self.ops.ids(np.array([token_id], np.uint32))))[0]

    def step_logits(self, state: DecoderState, ids: Tensor) -> Tensor:
        """One decoder step on the backend: ids [1] in, logits tensor [1, n_vocab] out, no read-back."""
        ops, c = self.ops, self.config
        pos0 = state.position
        if pos0 + 1 > c.max_positions:
            raise ValueError(f"the decoder holds {c.max_positions} tokens; token {pos0 + 1} was fed")
        x = ops.embed(ids, self.token_embedding, None, 0)
        encoded = state.encoder_output
        for block, self_cache, cross_cache in zip(self.dec_blocks, state.self_caches, encoded.cross_caches):
            h = self._norm(x, block.norm_self)
            attn = block.self_attn
            k = self._rotate(self._apply(h, attn.k), c.n_decoder_heads, pos0)
            ops.kv_pack(self_cache, k, self._apply(h, attn.v), pos0)
            q = self._rotate(self._apply(h, attn.q), c.n_decoder_heads, pos0)
            x = self._apply(ops.attend(q, self_cache, pos0 + 1, causal=True), attn.out, residual=x)

            h = self._norm(x, block.norm_cross)
            attn = block.cross_attn
            heard = ops.attend(self._apply(h, attn.q), cross_cache, encoded.length, causal=False)
            x = self._apply(heard, attn.out, residual=x)

            hidden = ops.swiglu(self._apply(self._norm(x, block.norm_ffn), block.fc1))
            x = self._apply(hidden, block.fc2, residual=x)
        state.position = pos0 + 1
        return self._apply(self._norm(x, self.dec_final_norm), self.unembed)


class Stem:
    """The rows of the stem's first convolution (``tanh(conv0)``) of audio that may be growing at its end.

    Call it with the audio so far; it returns float32 [T0, d], T0 = (n - 127) // 64 + 1, and keeps every
    complete block of ``STEM_BLOCK`` rows, so that a later call with longer audio *that starts with the
    same samples* computes only the rows past them. Rows are read back from the backend: they are few
    (one per 4 ms) and the encoder uploads them once per pass.
    """

    def __init__(self, model: MoonshineModel):
        self.model = model
        self._blocks: list[np.ndarray] = []  # complete blocks [STEM_BLOCK, d], in order

    def __call__(self, pcm: np.ndarray) -> np.ndarray:
        kernel, stride = STEM_KERNELS[0], STEM_STRIDES[0]
        rows = (len(pcm) - kernel) // stride + 1
        span = (STEM_BLOCK - 1) * stride + kernel  # samples under one block of rows
        kept = min(len(self._blocks), -(-rows // STEM_BLOCK))
        fresh = []
        for block in range(kept, -(-rows // STEM_BLOCK)):
            samples = pcm[block * STEM_BLOCK * stride :][:span]
            # the last block may be short: zeros under rows that don't exist yet, dropped below
            fresh.append(self._rows(np.pad(samples, (0, span - len(samples)))))
        arrays = [self.model.ops.read(tensor) for tensor in fresh]  # one submission on the GPU
        if kept == len(self._blocks):  # keep the blocks whose every row has its samples
            self._blocks += arrays[: max(0, rows // STEM_BLOCK - kept)]
        return np.concatenate([*self._blocks[:kept], *arrays])[:rows]

    def _rows(self, samples: np.ndarray) -> Tensor:
        ops = self.model.ops
        x = ops.tensor(samples.reshape(-1, 1))  # time-major [span, 1]
        unfolded = ops.im2col(x, STEM_KERNELS[0], STEM_STRIDES[0], 0)  # [STEM_BLOCK, 127]
        return ops.gemm(unfolded, self.model.stem[0].weight, act="tanh")
