"""Whisper's encoder and decoder, written once against ``engine.ops.Backend`` so they run on any backend.

Weights come from a GGUF file in transcribe.cpp's layout (``enc.*``, ``dec.*`` tensors, ``stt.whisper.*``
keys). The model code does no arithmetic of its own on activations: every step is an ``ops`` call, and
numpy only touches data where it enters (the log-mel) or leaves (the logits after SOT, for the no-speech
probability and the language; tokens are chosen on the backend, ``WhisperOps.whisper_select``).

Shapes: the encoder maps a log-mel [n_mels, 2*n_audio_ctx] (3000 frames of 10 ms) to states
[n_audio_ctx, d] (1500 positions of 20 ms); the decoder maps token ids to logits [vocab] for the last one.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
import numpy as np

from sayso.engine.errors import ModelFileError, check_interrupt
from sayso.engine.layers import (Linear, Norm, NormedRow, apply, conv, decoder_block, encoder_block, in_submissions,
                                  layer_norm, norm)
from sayso.engine.ops import Backend, KVCache, Position, Tensor

LAYER_NORM_EPS = 1e-5  # PyTorch's nn.LayerNorm default, which Whisper was trained with
CONV_KERNEL = 3


@dataclass(frozen=True)
class WhisperConfig:
    """Hyperparameters and special token ids from the ``stt.whisper.*`` keys of the model file."""

    n_mels: int
    n_audio_ctx: int  # encoder positions (1500 = 30 s at 20 ms)
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int  # decoder positions (448)
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_vocab: int
    activation: str
    eot: int
    sot: int
    prev_sot: int
    transcribe: int
    translate: int
    no_timestamps: int
    suppress_tokens: tuple[int, ...]
    begin_suppress_tokens: tuple[int, ...]
    multilingual: bool  # takes a language token and can detect the language (stt.capability.lang_detect)
    can_translate: bool

    @classmethod
    def from_model_file(cls, model_file) -> WhisperConfig:
        def whisper_int(key: str) -> int:
            return int(model_file.require(f"stt.whisper.{key}"))

        if not model_file.get("stt.whisper.decoder.tie_word_embeddings", True):
            raise ModelFileError(
                model_file.path, "has a separate output projection, which this engine doesn't read",
                "Use a Whisper file converted with tied embeddings (every OpenAI Whisper model).")
        return cls(
            n_mels=whisper_int("encoder.num_mel_bins"),
            n_audio_ctx=whisper_int("encoder.max_source_positions"),
            n_audio_state=whisper_int("encoder.d_model"),
            n_audio_head=whisper_int("encoder.n_heads"),
            n_audio_layer=whisper_int("encoder.n_layers"),
            n_text_ctx=whisper_int("decoder.max_target_positions"),
            n_text_state=whisper_int("decoder.d_model"),
            n_text_head=whisper_int("decoder.n_heads"),
            n_text_layer=whisper_int("decoder.n_layers"),
            n_vocab=whisper_int("decoder.vocab_size"),
            activation=str(model_file.get("stt.whisper.encoder.activation", "gelu")),
            eot=int(model_file.require("tokenizer.ggml.eos_token_id")),
            sot=whisper_int("sot_token_id"),
            prev_sot=whisper_int("prev_sot_token_id"),
            transcribe=whisper_int("transcribe_token_id"),
            translate=whisper_int("translate_token_id"),
            no_timestamps=whisper_int("no_timestamps_token_id"),
            suppress_tokens=tuple(int(t) for t in model_file.get("stt.whisper.suppress_tokens", [])),
            begin_suppress_tokens=tuple(int(t) for t in model_file.get("stt.whisper.begin_suppress_tokens", [])),
            multilingual=bool(model_file.get("stt.capability.lang_detect", False)),
            can_translate=bool(model_file.get("stt.capability.translate", False)),
        )


@dataclass
class EncoderOutput:
    """The encoded window: ``states`` [n_audio_ctx, d] and, per decoder layer, a KV cache holding that
    layer's cross-attention keys and values of the states (computed once, read at every decoder step)."""

    states: Tensor
    cross_caches: list[KVCache]


@dataclass
class DecoderState:
    """One decoding of one window: per-layer self-attention KV caches filled up to ``position``, which
    ``at`` holds on the backend too, so that every decoder step records the same work."""

    cross_caches: list[KVCache]
    self_caches: list[KVCache]
    at: Position
    position: int = 0


class WhisperModel:
    """Whisper's weights on a backend, with ``encode`` and an incremental ``decode_step``."""

    def __init__(self, model_file, ops: Backend):
        self.ops = ops
        self.config = WhisperConfig.from_model_file(model_file)
        c = self.config
        self.conv0 = conv(model_file, ops, "enc.conv.0")
        self.conv1 = conv(model_file, ops, "enc.conv.1")
        self.enc_positions = ops.tensor(model_file.array("enc.pos_emb.weight"))  # [n_audio_ctx, d]
        self.enc_blocks = [encoder_block(model_file, ops, f"enc.blocks.{i}") for i in range(c.n_audio_layer)]
        self.enc_final_norm = norm(model_file, ops, "enc.final_norm")
        # [n_vocab, d]: the embedding table, and (tied) the output projection that makes logits
        self.token_embedding = ops.weight(model_file.tensor("dec.token_embd.weight"))
        self.unembed = Linear(self.token_embedding, None)  # logits: the table, tied, as a layer
        self.dec_positions = ops.tensor(model_file.array("dec.pos_emb.weight"))  # [n_text_ctx, d]
        # q, k and v of a decoder step's self-attention in one product (``StackedAttention``)
        self.dec_blocks = [decoder_block(model_file, ops, f"dec.blocks.{i}", stack_self_qkv=True)
                           for i in range(c.n_text_layer)]
        self.dec_final_norm = norm(model_file, ops, "dec.final_norm")
        # Per-layer KV cache sets of encoder outputs and decoder sessions that were dropped, handed out
        # again: a window then allocates no cache, and a GPU reuses the bind groups that name them.
        self._spare_cross_caches: list[list[KVCache]] = []
        self._spare_self_caches: list[list[KVCache]] = []
        self._batch_positions: tuple[int, Tensor] | None = None  # (batch, its table): ``_positions``

    # ---- building blocks ----------------------------------------------------------------------------

    def _apply(self, x: Tensor, linear: Linear, act: str = "none", residual: Tensor | None = None) -> Tensor:
        return apply(self.ops, x, linear, act, residual)

    def _layer_norm(self, x: Tensor, norm: Norm) -> Tensor | NormedRow:
        """Normalised ``x`` for ``_apply``; a decoder step's single row is normalised by the products
        that read it (``engine.layers.NormedRow``)."""
        return layer_norm(self.ops, x, norm.weight, norm.bias, LAYER_NORM_EPS)

    def _ffn(self, x: Tensor, norm: Norm, fc1: Linear, fc2: Linear) -> Tensor:
        """Pre-LN feed-forward branch added back onto ``x``."""
        hidden = self._apply(self._layer_norm(x, norm), fc1, act=self.config.activation)
        return self._apply(hidden, fc2, residual=x)

    # ---- encoder ------------------------------------------------------------------------------------

    def encode(self, mel: np.ndarray | Tensor, interrupt=None) -> EncoderOutput:
        """Encode one 30 s window. mel: float32 [n_mels, 2*n_audio_ctx] (``frontend.log_mel``), or the
        backend's tensor [2*n_audio_ctx, n_mels] (``frontend.BackendLogMel``). ``interrupt``: a
        ``threading.Event`` looked at before each block (``errors.Interrupted``)."""
        c = self.config
        on_backend = not isinstance(mel, np.ndarray)
        shape = (2 * c.n_audio_ctx, c.n_mels) if on_backend else (c.n_mels, 2 * c.n_audio_ctx)
        if tuple(mel.shape) != shape:
            raise ValueError(f"the encoder takes a log-mel of shape {shape}, got {tuple(mel.shape)}; "
                             "pad or trim the audio to 30 s first")
        x = mel if on_backend else self.ops.tensor(np.ascontiguousarray(mel.T))  # time-major [3000, n_mels]
        return self._encode(x, 1, interrupt)[0]

    def encode_many(self, mels: list[np.ndarray | Tensor]) -> list[EncoderOutput]:
        """Encode several 30 s windows in one pass, each mel as ``encode`` takes it: the products take the
        rows of every window at once, the convolutions and attention keep to each window's own, so each
        output is the one ``encode`` gives for that window. A backend's features are read back to be
        joined (3000 x n_mels floats a window, little beside the pass)."""
        c = self.config
        frames = [np.ascontiguousarray(mel.T) if isinstance(mel, np.ndarray) else self.ops.read(mel) for mel in mels]
        for mel in frames:
            if mel.shape != (2 * c.n_audio_ctx, c.n_mels):
                raise ValueError(f"the encoder takes log-mels of {2 * c.n_audio_ctx} frames of {c.n_mels}, "
                                 f"got {mel.shape}")
        if not frames:
            return []
        return self._encode(self.ops.tensor(np.concatenate(frames)), len(frames))  # time-major [B*3000, n_mels]

    def _encode(self, x: Tensor, batch: int, interrupt=None) -> list[EncoderOutput]:
        """The encoder on ``batch`` windows' log-mels one after the other, x: [batch*2*n_audio_ctx, n_mels].
        ``interrupt``: see ``encode``; looked at on the host, it adds no read-back."""
        ops, c = self.ops, self.config
        x = ops.gemm(ops.im2col(x, CONV_KERNEL, 1, 1, batch), self.conv0.weight, self.conv0.bias, act="gelu")
        x = ops.gemm(ops.im2col(x, CONV_KERNEL, 2, 1, batch), self.conv1.weight, self.conv1.bias, act="gelu")
        x = ops.add(x, self._positions(batch))  # [batch*1500, d]
        for block in in_submissions(ops, self.enc_blocks):
            check_interrupt(interrupt)
            h = self._layer_norm(x, block.norm_attn)
            attn = block.attn
            q, k, v = self._apply(h, attn.q), self._apply(h, attn.k), self._apply(h, attn.v)
            x = self._apply(ops.attention(q, k, v, c.n_audio_head, batch=batch), attn.out, residual=x)
            x = self._ffn(x, block.norm_ffn, block.fc1, block.fc2)
        states = self._layer_norm(x, self.enc_final_norm)
        windows = [self._caches(self._spare_cross_caches, c.n_audio_ctx) for _ in range(batch)]
        for layer, block in enumerate(self.dec_blocks):
            attn = block.cross_attn
            keys, values = self._apply(states, attn.k), self._apply(states, attn.v)
            for b, caches in enumerate(windows):
                window = slice(b * c.n_audio_ctx, (b + 1) * c.n_audio_ctx)
                ops.kv_pack(caches[layer], ops.rows(keys, window.start, window.stop),
                            ops.rows(values, window.start, window.stop), 0)
        outputs = []
        for b, caches in enumerate(windows):
            output = EncoderOutput(states if batch == 1 else ops.rows(states, b * c.n_audio_ctx,
                                                                      (b + 1) * c.n_audio_ctx), caches)
            weakref.finalize(output, self._spare_cross_caches.append, caches)
            outputs.append(output)
        return outputs

    def _positions(self, batch: int) -> Tensor:
        """The positional table [n_audio_ctx, d] repeated for ``batch`` windows. The last batch size's is
        kept: an archive's passes are of one size but its last."""
        if batch == 1:
            return self.enc_positions
        if self._batch_positions is None or self._batch_positions[0] != batch:
            table = np.tile(self.ops.read(self.enc_positions), (batch, 1))
            self._batch_positions = batch, self.ops.tensor(table)
        return self._batch_positions[1]

    def _caches(self, spare: list[list[KVCache]], capacity: int) -> list[KVCache]:
        """A KV cache per decoder layer for ``capacity`` positions: a spare set if there is one (its
        stale contents are never read: attention only reads positions written since)."""
        if spare:
            return spare.pop()
        c = self.config
        head_dim = c.n_text_state // c.n_text_head
        return [self.ops.kv_cache(c.n_text_head, head_dim, capacity) for _ in range(c.n_text_layer)]

    # ---- decoder ------------------------------------------------------------------------------------

    def decoder_session(self, encoder_output: EncoderOutput) -> DecoderState:
        """Empty self-attention caches (n_text_ctx positions each) over one encoded window."""
        caches = self._caches(self._spare_self_caches, self.config.n_text_ctx)
        state = DecoderState(encoder_output.cross_caches, caches, self.ops.position(0))
        weakref.finalize(state, self._spare_self_caches.append, caches)
        return state

    def decode_step(self, state: DecoderState, token_ids: list[int]) -> np.ndarray:
        """Feed ``token_ids`` at the state's position; return float32 logits [n_vocab] after the last one
        (``prefill``, then a read-back)."""
        return self.ops.read(self.prefill(state, token_ids))[0]

    def prefill(self, state: DecoderState, token_ids: list[int]) -> Tensor:
        """Feed ``token_ids`` at the state's position; return the logits tensor [1, n_vocab] after the
        last one, without read-back.

        Several ids are a prefill: all but the last run as one causal block that only fills the KV
        caches, then the last runs alone, so the logits always come from a single row (a gemv against
        the tied embedding) and no row has to be cut out of a tensor.
        """
        token_ids = [int(t) for t in token_ids]
        if not token_ids:
            raise ValueError("prefill needs at least one token id")
        if len(token_ids) > 1:
            self._decoder_layers(state, self.ops.ids(np.array(token_ids[:-1], np.uint32)))
        return self.step_logits(state, self.ops.ids(np.array(token_ids[-1:], np.uint32)))

    def step_logits(self, state: DecoderState, ids: Tensor) -> Tensor:
        """One decoder step on the backend: ids [1] in, logits tensor [1, n_vocab] out, no read-back
        (so a GPU can record it, and an argmax can feed the next step's ``ids``)."""
        x = self._decoder_layers(state, ids)
        return self._apply(self._layer_norm(x, self.dec_final_norm), self.unembed)

    def _decoder_layers(self, state: DecoderState, ids: Tensor) -> Tensor:
        """Run ids [T] through every decoder block at positions state.position...+T-1; returns [T, d]."""
        ops, c = self.ops, self.config
        pos0, t = state.position, ids.shape[0]
        if pos0 + t > c.n_text_ctx:
            raise ValueError(f"the decoder holds {c.n_text_ctx} tokens; {pos0 + t} were fed")
        at = state.at  # pos0, read on the backend
        x = ops.embed(ids, self.token_embedding, self.dec_positions, at)
        for block, self_cache, cross_cache in zip(self.dec_blocks, state.self_caches, state.cross_caches):
            qkv = self._apply(self._layer_norm(x, block.norm_self), block.self_attn.qkv)  # [t, 3d]
            q, k, v = (ops.columns(qkv, i * c.n_text_state, (i + 1) * c.n_text_state) for i in range(3))
            ops.kv_pack(self_cache, k, v, at)
            seen = ops.attend(q, self_cache, at + t, causal=True)
            x = self._apply(seen, block.self_attn.out, residual=x)

            h = self._layer_norm(x, block.norm_cross)
            attn = block.cross_attn
            heard = ops.attend(self._apply(h, attn.q), cross_cache, c.n_audio_ctx, causal=False)
            x = self._apply(heard, attn.out, residual=x)

            x = self._ffn(x, block.norm_ffn, block.fc1, block.fc2)
        ops.advance(at, t)
        state.position = pos0 + t
        return x
