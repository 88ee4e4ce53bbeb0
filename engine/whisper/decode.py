"""Greedy decoding of one 30 s window, with the rules of OpenAI's whisper (and whisper.cpp).

The decoder is fed the start-of-transcript sequence, then at each step the most likely token after
these logit rules:

* suppress tokens: ``stt.whisper.suppress_tokens`` (symbols the model should not write) and every
  control token except end-of-text and the timestamps;
* begin-suppress: at the first step, ``stt.whisper.begin_suppress_tokens`` (a bare space, EOT);
* timestamps (OpenAI's ApplyTimestampRules): the first token is a timestamp of at most 1 s; timestamps
  come in pairs (end of one segment, start of the next) except right before EOT; they never go back;
  and a timestamp is forced when the timestamps together are likelier than the best text token.

A window whose no-speech probability is above 0.6 is dropped unless its tokens were confident
(average log-probability above -1), as in OpenAI's ``transcribe``.

Long audio is read window after window (``WhisperTranscriber.transcribe_window``): each window starts
where the last complete segment of the one before ended (``WindowText.seek``) and is conditioned on the
text so far, timestamps included, as OpenAI's ``transcribe`` and whisper.cpp condition it.

A prompt conditions the decoder, never replaces what was said: it keeps its last ``n_text_ctx // 2 - 1``
tokens (223, as OpenAI's reference does; a warning says so), and a window decoded with it that fails
OpenAI's quality checks (average log-probability below -1, or text that gzip compresses more than
2.4 times: a loop) is decoded again without it. A 10,000-word prompt of numbered words otherwise
made the model write the prompt's last word instead of the speech.

The rules are ``WhisperOps.whisper_select`` (numpy oracle: ``engine.cpu.ops.whisper_allowed_logits``; GPU:
``shaders/whisper_select.wgsl``), so token choice stays on the backend and the decoder runs
``ops.decode_steps_per_read`` steps per submission without reading logits back.
"""

from __future__ import annotations

import functools
import logging
import math
import zlib
from collections import deque
from dataclasses import dataclass

import numpy as np

from sayso.engine.errors import NonFiniteOutput, check_interrupt
from sayso.engine.ops import WhisperRules
from sayso.engine.transcript import Segment, Token
from sayso.engine.whisper.model import DecoderState, EncoderOutput, WhisperConfig, WhisperModel
from sayso.engine.whisper.tokenizer import TIMESTAMP_SECONDS, Tokenizer

SAMPLE_LEN = 224  # most tokens sampled per window: n_text_ctx // 2, as OpenAI
MAX_INITIAL_TIMESTAMP = 1.0  # seconds: the first segment starts within the first second
NO_SPEECH_THRESHOLD = 0.6
LOGPROB_THRESHOLD = -1.0
COMPRESSION_RATIO_THRESHOLD = 2.4

log = logging.getLogger(__name__)
WINDOW_SECONDS = 30.0
NO_SPEECH_TOKENS = ("<|nospeech|>", "<|nocaptions|>")  # the name changed between vocabularies


@dataclass
class DecodingResult:
    """What the greedy decoder produced for one window, before it is cut into segments.

    ``tokens``: sampled ids, EOT excluded. ``logprobs``: each one's log-probability after the logit
    rules. ``avg_logprob``: their sum with EOT's, over len(tokens) + 1 (OpenAI's definition).
    ``no_speech_prob``: probability of the no-speech token right after SOT.
    """

    tokens: list[int]
    logprobs: list[float]
    avg_logprob: float
    no_speech_prob: float
    language: str


def logit_rules(config: WhisperConfig, tokenizer: Tokenizer, timestamps: bool) -> WhisperRules:
    """The suppression and timestamp rules of the module docstring for ``WhisperOps.whisper_select``."""
    begin = tokenizer.timestamp_begin
    # every control token between EOT and the timestamps: SOT, languages, tasks, no-speech, ...
    control = np.arange(config.eot + 1, begin)
    suppress = np.union1d(np.array(config.suppress_tokens, np.int64), control)
    return WhisperRules(
        n_vocab=config.n_vocab,
        eot=config.eot,
        timestamp_begin=begin,
        suppress=tuple(int(t) for t in suppress),
        begin_suppress=tuple(int(t) for t in config.begin_suppress_tokens),
        timestamps=timestamps,
        max_initial_timestamp=round(MAX_INITIAL_TIMESTAMP / TIMESTAMP_SECONDS),
    )


def sot_sequence(
    model: WhisperModel, tokenizer: Tokenizer, language: str | None, task: str, timestamps: bool
) -> list[int]:
    """SOT, then for multilingual models the language and task tokens, then <|notimestamps|> when
    decoding without timestamps. English-only models take SOT alone (OpenAI and whisper.cpp alike).
    ``language`` None leaves its token out: the backend chooses and feeds it (``decode_window``)."""
    c = model.config
    sequence = [c.sot]
    if c.multilingual:
        if language is not None:
            if language not in tokenizer.language_tokens():
                known = ", ".join(tokenizer.language_tokens())
                raise ValueError(f"unknown language {language!r}; this model knows {known}")
            sequence.append(tokenizer.special(f"<|{language}|>"))
        sequence.append(c.translate if task == "translate" else c.transcribe)
    if not timestamps:
        sequence.append(c.no_timestamps)
    return sequence


def no_speech_token(tokenizer: Tokenizer) -> int | None:
    for name in NO_SPEECH_TOKENS:
        try:
            return tokenizer.special(name)
        except KeyError:
            continue
    return None


def language_rules(config: WhisperConfig, tokenizer: Tokenizer) -> WhisperRules:
    """Rules under which ``WhisperOps.whisper_select`` picks the language whose token is likeliest (the
    first on ties, as an argmax over them): every other token is suppressed."""
    return _rules_allowing_only(config, tokenizer.timestamp_begin, tuple(tokenizer.language_tokens().values()))


@functools.cache
def _rules_allowing_only(config: WhisperConfig, timestamp_begin: int, allowed: tuple[int, ...]) -> WhisperRules:
    """Kept by value, not by tokenizer, so a model dropped doesn't stay alive in the cache."""
    kept = set(allowed)
    return WhisperRules(
        n_vocab=config.n_vocab,
        eot=config.eot,
        timestamp_begin=timestamp_begin,
        suppress=tuple(t for t in range(config.n_vocab) if t not in kept),
        begin_suppress=(),
        timestamps=False,
        max_initial_timestamp=0,
    )


def decode_window(
    model: WhisperModel,
    tokenizer: Tokenizer,
    encoder_output,
    language: str | None = None,
    task: str = "transcribe",
    prompt_tokens: list[int] | None = None,
    timestamps: bool = True,
    interrupt=None,
) -> DecodingResult:
    """Greedy decoding of one encoded window (see the module docstring for the rules). ``interrupt``: see
    ``sample_greedy``."""
    c = model.config
    if task not in ("transcribe", "translate"):
        raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}")
    if task == "translate" and not c.can_translate:
        raise ValueError("this model can't translate; it only transcribes")
    if not c.multilingual:
        language = "en"

    state = model.decoder_session(encoder_output)
    prompt_limit = c.n_text_ctx // 2 - 1
    if prompt_tokens and len(prompt_tokens) > prompt_limit:
        log.warning("The prompt is %d tokens long; the model takes its last %d.", len(prompt_tokens), prompt_limit)
    prefix = [c.prev_sot, *prompt_tokens[-prompt_limit:]] if prompt_tokens else []
    # The SOT row's logits give the no-speech probability; they are read back after sampling, so the
    # GPU runs the encoder while the decoder's steps are recorded. The language, when it must be
    # detected, is chosen on the backend from them too and fed on as the next token.
    ops = model.ops
    logits = model.prefill(state, [*prefix, c.sot])
    # Of the SOT row only the no-speech token's probability is wanted: the backend computes the row's
    # softmax and four bytes come back (a GPU reads a few bytes from memory it needn't pin for that).
    nospeech = no_speech_token(tokenizer)
    read_no_speech = None
    if nospeech is not None:
        read_no_speech = ops.read_later(ops.columns(ops.softmax(logits), nospeech, nospeech + 1))
    read_language = None
    if language is None:
        detection = ops.whisper_selection(language_rules(c, tokenizer), 1)
        # OpenAI detects the language from SOT alone, without the prompt before it.
        heard = logits if not prefix else model.prefill(model.decoder_session(encoder_output), [c.sot])
        logits = model.step_logits(state, ops.whisper_select(heard, detection))
        read_language = ops.read_whisper_selection_later(detection)
    rest = sot_sequence(model, tokenizer, language, task, timestamps)[1:]
    if rest:
        logits = model.prefill(state, rest)
    max_sampled = min(SAMPLE_LEN, c.n_text_ctx - state.position)  # each sampled token but the last is fed
    chosen, chosen_logprobs = sample_greedy(model, state, logits, logit_rules(c, tokenizer, timestamps), max_sampled,
                                            interrupt)
    if read_language is not None:
        language = tokenizer.language_code(int(read_language()[0][0]))
    no_speech_prob = float(read_no_speech()[0, 0]) if read_no_speech is not None else 0.0
    n = len(chosen) - int(chosen[-1] == c.eot)  # EOT is no text, but its log-probability counts
    sampled = [int(t) for t in chosen[:n]]
    logprobs = [float(p) for p in chosen_logprobs[:n]]
    eot_logprob = float(chosen_logprobs[n]) if n < len(chosen) else 0.0
    avg_logprob = (sum(logprobs) + eot_logprob) / (len(sampled) + 1)
    if not (math.isfinite(no_speech_prob) and math.isfinite(avg_logprob)):  # NaN logits: greedy picks "!" on and on
        raise NonFiniteOutput("decoder's scores")
    return DecodingResult(sampled, logprobs, avg_logprob, no_speech_prob, language)


def sample_greedy(
    model: WhisperModel, state: DecoderState, logits, rules: WhisperRules, max_sampled: int, interrupt=None
) -> tuple[np.ndarray, np.ndarray]:
    """Choose tokens from ``logits`` (the tensor [1, n_vocab] after the SOT sequence) on, feeding each
    back, until EOT or ``max_sampled`` tokens; returns them (EOT last if chosen) and their log-probs.

    After the first choice, steps go ``ops.decode_steps_per_read`` at a time into one submission:
    the next step's logits from the selection's ids, then the next choice, all on the backend; only
    the selection (a few hundred bytes) is read back after each batch. Steps recorded after EOT run
    on EOT and are dropped. Every batch records the same calls on tensors that are allocated once
    (the selection) or come back from the pool in the same order, so a GPU reuses its bind groups.

    Where reads are round trips to a GPU (more than one step per read), the next batch is recorded
    and submitted before the last one's read is looked at: the GPU runs one batch while Python
    records the next, and a window ends with one batch run in vain. The decoder's position is on
    the backend (``DecoderState.at``), so a full batch records the same work each time and a GPU
    replays it (``Ops.repeatable``) rather than running the model's Python for every step.

    ``interrupt``: a ``threading.Event`` looked at on the host before each batch is recorded
    (``errors.Interrupted``), so that it adds no read-back; a batch in flight then is dropped with its
    read, as at EOT.
    """
    ops = model.ops
    selection = ops.whisper_selection(rules, max_sampled)
    ids = ops.whisper_select(logits, selection)
    ops.flush()  # so that every batch of steps starts a submission at the same dispatch index
    steps_per_read = ops.decode_steps_per_read

    def record_steps(count: int) -> None:
        for _ in range(count):
            ops.whisper_select(model.step_logits(state, ids), selection)  # ids: the selection's own

    # Its position on the backend, a batch of steps records the same work every time: a GPU replays it.
    full_batch = ops.repeatable(lambda: record_steps(steps_per_read))
    first = state.position
    recorded = 1
    ahead = 1 if steps_per_read > 1 else 0  # batches in flight while one is recorded
    reads = deque()  # reads of the selection after each batch, not looked at yet, oldest first
    while True:
        check_interrupt(interrupt)
        batch = min(steps_per_read, max_sampled - recorded)
        if batch == steps_per_read:
            full_batch()
        else:
            record_steps(batch)
        recorded += batch
        state.position = first + recorded - 1  # a replayed batch ran no Python to count its steps
        if batch or not reads:
            reads.append(ops.read_whisper_selection_later(selection))
        if batch and len(reads) <= ahead:
            continue
        tokens, logprobs = reads.popleft()()
        if tokens[-1] == rules.eot or (recorded == max_sampled and not reads):
            return tokens, logprobs  # a read still in flight is dropped with its batch


@dataclass
class WindowText:
    """One window transcribed. ``segments``: in seconds from the start of the file; ``seek``: seconds
    from the window's start to where the next window starts (OpenAI's rule: the end of its last complete
    segment when the text was cut off mid-segment, else all of the audio it holds); ``tokens``: those of
    its complete segments, timestamps included (what the next window is conditioned on); ``plausible``:
    whether the text passed the quality checks as first decoded (with the prompt, where there was one)."""

    segments: list[Segment]
    language: str
    seek: float
    tokens: list[int]
    plausible: bool = True


def transcribe_window(
    model: WhisperModel,
    tokenizer: Tokenizer,
    mel: np.ndarray | EncoderOutput,
    language: str | None = None,
    task: str = "transcribe",
    prompt: str | list[int] | None = None,
    offset: float = 0.0,
    duration: float = WINDOW_SECONDS,
    timestamps: bool = True,
    interrupt=None,
) -> WindowText:
    """Transcribe one window: mel [n_mels, 3000], log-mel of 30 s of audio starting at ``offset`` s, or
    the window already encoded (``WhisperModel.encode_many``).

    ``prompt``: text (or token ids, e.g. the windows' before) to condition on. ``duration``: seconds of
    real audio in the window, the end of a segment that has no closing timestamp. A window the model
    calls silence gives no segments and is passed over whole. ``interrupt``: a ``threading.Event``; once
    it is set the work stops with ``errors.Interrupted`` at the next encoder block or batch of decoder
    steps (``WhisperModel.encode``, ``sample_greedy``).
    """
    if isinstance(prompt, str):  # OpenAI's initial_prompt: the text with one leading space
        prompt = tokenizer.encode(" " + prompt.strip()) if prompt.strip() else None
    encoded = mel if isinstance(mel, EncoderOutput) else model.encode(mel, interrupt)
    result = decode_window(model, tokenizer, encoded, language, task, prompt, timestamps, interrupt)
    passed = plausible(tokenizer, result)
    if prompt and not passed:
        log.warning("The text decoded with the prompt failed the quality checks; this window is decoded without it.")
        result = decode_window(model, tokenizer, encoded, language, task, None, timestamps, interrupt)
    if result.no_speech_prob > NO_SPEECH_THRESHOLD and result.avg_logprob <= LOGPROB_THRESHOLD:
        return WindowText([], result.language, duration, [], passed)
    segments, resume = split_segments(tokenizer, result, offset, duration)
    if resume is None or resume <= offset:
        return WindowText(segments, result.language, duration, result.tokens, passed)
    complete = last_pair(tokenizer, result.tokens)  # the cut-off segment opens here
    return WindowText(segments, result.language, resume - offset, result.tokens[:complete], passed)


def last_pair(tokenizer: Tokenizer, tokens: list[int]) -> int | None:
    """Index of the second timestamp of the last pair (a segment's end, then the next one's start) in
    ``tokens``; None without a pair."""
    pairs = [i for i in range(1, len(tokens)) if tokenizer.is_timestamp(tokens[i]) and tokenizer.is_timestamp(tokens[i - 1])]
    return pairs[-1] if pairs else None


def plausible(tokenizer: Tokenizer, result: DecodingResult) -> bool:
    """OpenAI's checks of a decoded window: confident enough, and no loop (text that compresses well)."""
    text = tokenizer.decode(result.tokens).encode()
    compression = len(text) / len(zlib.compress(text)) if text else 0.0
    return result.avg_logprob >= LOGPROB_THRESHOLD and compression <= COMPRESSION_RATIO_THRESHOLD


def split_segments(
    tokenizer: Tokenizer, result: DecodingResult, offset: float, duration: float
) -> tuple[list[Segment], float | None]:
    """Cut sampled tokens into segments at timestamp pairs, as OpenAI's ``transcribe`` does.

    Returns the segments (empty ones dropped) and where to resume (see ``transcribe_window``).
    """
    tokens, probs = result.tokens, np.exp(result.logprobs)
    is_stamp = [tokenizer.is_timestamp(t) for t in tokens]
    # A lone closing timestamp at the end means the last segment is complete.
    single_ending = len(tokens) >= 2 and is_stamp[-1] and not is_stamp[-2]
    boundaries = [i for i in range(1, len(tokens)) if is_stamp[i] and is_stamp[i - 1]]
    if boundaries:
        starts = [0, *boundaries]
        ends = [*boundaries, len(tokens)] if single_ending else boundaries
        spans = [(s, e, tokenizer.timestamp_seconds(tokens[s]), tokenizer.timestamp_seconds(tokens[e - 1]))
                 for s, e in zip(starts, ends)]
        resume = None if single_ending else offset + tokenizer.timestamp_seconds(tokens[boundaries[-1] - 1])
    else:  # no closed pair: one segment up to the last timestamp, or to the end of the audio
        stamps = [tokenizer.timestamp_seconds(t) for t, stamp in zip(tokens, is_stamp) if stamp]
        end = stamps[-1] if stamps and stamps[-1] > 0 else duration
        spans = [(0, len(tokens), 0.0, end)]
        resume = None
    segments = []
    for s, e, start, end in spans:
        segment = make_segment(tokenizer, tokens[s:e], probs[s:e], offset + start, offset + end)
        if segment.text:
            segments.append(segment)
    return segments, resume


def make_segment(tokenizer: Tokenizer, tokens: list[int], probs, start: float, end: float) -> Segment:
    """A segment of the text tokens among ``tokens``; each token's start time is interpolated between
    the segment's start and end by the characters before it (timestamps only mark segment ends)."""
    text_ids = [(t, p) for t, p in zip(tokens, probs) if not tokenizer.is_special(t)]
    texts = [tokenizer.token_text(t) for t, _ in text_ids]
    total = max(1, sum(len(text) for text in texts))
    timed = []
    before = 0
    for (token_id, prob), text in zip(text_ids, texts):
        timed.append(Token(token_id, text, start + (end - start) * before / total, float(prob)))
        before += len(text)
    return Segment(start, end, tokenizer.decode([t for t, _ in text_ids]).strip(), timed)
