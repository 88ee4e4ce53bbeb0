"""Greedy decoding of one utterance, the way Moonshine's own runtimes decode.

Moonshine has no prompt, language, task or timestamp tokens: the decoder starts from ``<s>``
(``decoder_start_token_id``) and takes the likeliest token until ``</s>``. It also stops after
``ceil(seconds * 6.5)`` tokens (Moonshine's ``max_tokens_per_second``: real speech needs fewer, so the
cap only cuts off the loops a model can fall into on noise or silence), and when the decoder's
positions run out. The utterance becomes one segment spanning the audio; each token's start time is
interpolated across it by the characters before the token.
"""

from __future__ import annotations

import math

import numpy as np

from sayso.engine.errors import NonFiniteOutput, check_interrupt
from sayso.engine.moonshine.model import MIN_SAMPLES, EncoderOutput, MoonshineModel, Stem
from sayso.engine.moonshine.tokenizer import Tokenizer
from sayso.engine.transcript import Segment, Token

SAMPLE_RATE = 16000
MAX_TOKENS_PER_SECOND = 6.5


def token_limit(seconds: float, max_positions: int) -> int:
    """The most tokens to sample for ``seconds`` of audio (the start token takes one position)."""
    return max(1, min(math.ceil(seconds * MAX_TOKENS_PER_SECOND), max_positions - 1))


def greedy_decode(model: MoonshineModel, encoded: EncoderOutput, seconds: float,
                  interrupt=None) -> tuple[list[int], list[float]]:
    """The sampled ids (``</s>`` excluded) and each one's probability. ``interrupt``: a
    ``threading.Event`` looked at before each step (``errors.Interrupted``)."""
    c = model.config
    limit = token_limit(seconds, c.max_positions)
    state = model.decoder_session(encoded)
    logits = model.decode_step(state, c.decoder_start)
    tokens: list[int] = []
    probs: list[float] = []
    while True:
        token = int(np.argmax(logits))
        if token == c.eos:
            break
        shifted = logits.astype(np.float64) - logits[token]
        tokens.append(token)
        probs.append(float(1.0 / np.exp(shifted).sum()))
        if len(tokens) == limit:
            break
        check_interrupt(interrupt)
        logits = model.decode_step(state, token)
    if not all(map(math.isfinite, probs)):  # NaN logits: argmax picks token 0 on and on
        raise NonFiniteOutput("decoder's scores")
    return tokens, probs


def transcribe_utterance(model: MoonshineModel, tokenizer: Tokenizer, pcm: np.ndarray,
                         offset: float = 0.0, stem: Stem | None = None, interrupt=None) -> list[Segment]:
    """The segment (none when silent or too short to encode) of one piece of 16 kHz audio that starts
    ``offset`` seconds into the file. ``stem``, ``interrupt``: see ``MoonshineModel.encode``."""
    pcm = np.asarray(pcm, np.float32).reshape(-1)
    if len(pcm) < MIN_SAMPLES:
        return []
    seconds = len(pcm) / SAMPLE_RATE
    tokens, probs = greedy_decode(model, model.encode(pcm, stem, interrupt), seconds, interrupt)
    segment = make_segment(tokenizer, tokens, probs, offset, offset + seconds)
    return [segment] if segment.text else []


def make_segment(tokenizer: Tokenizer, tokens: list[int], probs: list[float], start: float, end: float) -> Segment:
    """A segment of the text tokens among ``tokens``, their start times spread over [start, end] by the
    characters before each one."""
    text_ids = [(t, p) for t, p in zip(tokens, probs) if not tokenizer.is_special(t)]
    texts = [tokenizer.token_bytes(t).decode("utf-8", errors="replace") for t, _ in text_ids]
    total = max(1, sum(len(text) for text in texts))
    timed, before = [], 0
    for (token_id, prob), text in zip(text_ids, texts):
        timed.append(Token(token_id, text, start + (end - start) * before / total, prob))
        before += len(text)
    return Segment(start, end, tokenizer.decode([t for t, _ in text_ids]).strip(), timed)
