"""Whisper's greedy token selection (``WhisperOps.whisper_select``): the numpy rules case by case, the GPU
kernel against them, and decoding that allocates nothing once a window has run.

The rules are tested on a small made-up vocabulary (ids 0..399 text, 400 EOT, 401..449 control,
450..699 timestamps) so that a GPU test runs in well under a second on lavapipe; one test uses the
real tiny.en vocabulary and rules.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.data import AUDIO, TINY_EN_GGUF, needs_clips

from sayso.engine.audio import load_audio
from sayso.engine.cpu.ops import whisper_allowed_logits
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import WhisperRules
from sayso.engine.whisper.decode import decode_window, language_rules, logit_rules
from sayso.engine.whisper.frontend import log_mel
from sayso.engine.whisper.model import WhisperConfig, WhisperModel
from sayso.engine.whisper.tokenizer import Tokenizer

EOT, BEGIN, VOCAB = 400, 450, 700
RULES = WhisperRules(
    n_vocab=VOCAB,
    eot=EOT,
    timestamp_begin=BEGIN,
    suppress=(3, 77, *range(EOT + 1, BEGIN)),
    begin_suppress=(5, EOT),
    timestamps=True,
    max_initial_timestamp=50,
)
NO_TIMESTAMPS = replace(RULES, timestamps=False)
TEXT = set(range(EOT + 1)) - {3, 77}  # text ids and EOT that are never suppressed


def allowed(chosen: list[int], rules: WhisperRules = RULES, logits: np.ndarray | None = None) -> set[int]:
    """The ids the rules allow after ``chosen``; by default text logits 0 and timestamps -20, so that
    the timestamps together stay less likely than text."""
    if logits is None:
        logits = np.where(np.arange(VOCAB) < BEGIN, 0.0, -20.0).astype(np.float32)
    return set(np.flatnonzero(np.isfinite(whisper_allowed_logits(logits, rules, chosen))).tolist())


def stamps(lo: int, hi: int) -> set[int]:
    """Timestamp ids lo .. hi - 1."""
    return set(range(lo, hi))


def test_first_token_is_an_early_timestamp():
    assert allowed([]) == stamps(BEGIN, BEGIN + 51)


def test_begin_suppress_holds_at_the_first_step_only():
    assert allowed([], NO_TIMESTAMPS) == TEXT - {5, EOT}
    assert allowed([10], NO_TIMESTAMPS) == TEXT


def test_timestamp_rules_after_text_and_timestamps():
    after_start = stamps(BEGIN + 1, VOCAB)  # strictly after <|0.00|>
    assert allowed([BEGIN]) == TEXT  # a lone first timestamp opens a segment: text follows
    assert allowed([BEGIN, 10]) == TEXT | after_start
    # a segment's end (text, then a timestamp): its repeat, a later timestamp, or EOT
    assert allowed([BEGIN, 10, 460]) == {EOT} | stamps(460, VOCAB)
    assert allowed([BEGIN, 10, 460, 460]) == TEXT  # a pair just closed
    assert allowed([BEGIN, 10, 460, 460, 11]) == TEXT | stamps(461, VOCAB)


def test_timestamps_likelier_than_any_text_token_are_forced():
    logits = np.zeros(VOCAB, np.float32)  # 249 timestamps of logit 0 outweigh any one text token
    assert allowed([BEGIN, 10], logits=logits) == stamps(BEGIN + 1, VOCAB)
    logits[:BEGIN] = 6.0  # log(249) = 5.5 < 6: text stays allowed
    assert allowed([BEGIN, 10], logits=logits) == TEXT | stamps(BEGIN + 1, VOCAB)


def test_numpy_selection_stops_at_eot_and_at_capacity(cpu_ops):
    selection = cpu_ops.whisper_selection(RULES, capacity=3)
    logits = np.zeros((1, VOCAB), np.float32)
    logits[0, BEGIN + 2] = 5.0
    assert cpu_ops.whisper_select(logits, selection)[0] == BEGIN + 2
    logits[0, EOT] = 9.0
    for _ in range(3):
        assert cpu_ops.whisper_select(logits, selection)[0] == EOT
    tokens, logprobs = cpu_ops.read_whisper_selection(selection)
    assert tokens.tolist() == [BEGIN + 2, EOT] and logprobs.shape == (2,) and np.all(logprobs < 0)

    full = cpu_ops.whisper_selection(NO_TIMESTAMPS, capacity=2)
    logits[0, EOT] = 0.0
    logits[0, 7] = 9.0
    assert [int(cpu_ops.whisper_select(logits, full)[0]) for _ in range(3)] == [7, 7, EOT]
    assert cpu_ops.read_whisper_selection(full)[0].tolist() == [7, 7]


def random_logits(rng: np.random.Generator, steps: int, vocab: int, begin: int, eot: int) -> list[np.ndarray]:
    """Logits that take every branch of the rules: now timestamps likely, now EOT, now one token far
    ahead; every fourth step integer-valued, full of ties (also between text and timestamps)."""
    out = []
    for step in range(steps):
        if step % 4 == 3:
            x = rng.integers(-2, 3, vocab).astype(np.float32)
        else:
            x = (rng.standard_normal(vocab) * 2).astype(np.float32)
        roll = rng.random()
        if roll < 0.3:
            x[begin:] += 4.0
        elif roll < 0.33:
            x[eot] += 9.0
        elif roll < 0.5:
            x[rng.integers(vocab)] += 10.0
        out.append(x[None, :])
    return out


def select_in_lockstep(gpu_ops, cpu_ops, rules, capacity, logits):
    """Run the same logits through both backends' selections; GPU steps are recorded, read once."""
    gpu, cpu = gpu_ops.whisper_selection(rules, capacity), cpu_ops.whisper_selection(rules, capacity)
    for x in logits:
        gpu_ids = gpu_ops.whisper_select(gpu_ops.tensor(x), gpu)
        cpu_ops.whisper_select(x, cpu)
    gpu_tokens, gpu_logprobs = gpu_ops.read_whisper_selection(gpu)
    cpu_tokens, cpu_logprobs = cpu_ops.read_whisper_selection(cpu)
    np.testing.assert_array_equal(gpu_tokens, cpu_tokens)
    np.testing.assert_allclose(gpu_logprobs, cpu_logprobs, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(gpu_ops.read(gpu_ids), cpu.ids)
    return cpu_tokens


@pytest.mark.gpu
@pytest.mark.parametrize("rules", [RULES, NO_TIMESTAMPS], ids=["timestamps", "no-timestamps"])
def test_gpu_selection_equals_numpy(gpu_ops, cpu_ops, rules):
    rng = np.random.default_rng(0)
    ends = set()
    for _ in range(6):  # 28 steps into room for 24 tokens: each sequence ends at EOT or when full
        tokens = select_in_lockstep(gpu_ops, cpu_ops, rules, 24, random_logits(rng, 28, VOCAB, BEGIN, EOT))
        ends.add("eot" if tokens[-1] == EOT else "full")
    assert ends == {"eot", "full"}


@pytest.mark.gpu
def test_gpu_selection_equals_numpy_on_the_real_vocabulary(gpu_ops, cpu_ops, tokenizer, model_file):
    rules = logit_rules(WhisperConfig.from_model_file(model_file), tokenizer, timestamps=True)
    assert rules.n_vocab == 51864 and rules.timestamp_begin == 50363
    rng = np.random.default_rng(1)
    logits = random_logits(rng, 12, rules.n_vocab, rules.timestamp_begin, rules.eot)
    select_in_lockstep(gpu_ops, cpu_ops, rules, 12, logits)


@pytest.mark.gpu
def test_language_chosen_on_the_backend_is_the_likeliest_language_token(gpu_ops, cpu_ops, tokenizer, model_file):
    """``language_rules`` leave only the language tokens, so a selection of one token under them is
    the argmax over those tokens alone (what OpenAI's detect_language takes), on both backends."""
    rules = language_rules(WhisperConfig.from_model_file(model_file), tokenizer)
    languages = np.array(list(tokenizer.language_tokens().values()))
    assert len(languages) == 99 and rules.n_vocab - len(rules.suppress) == 99
    rng = np.random.default_rng(2)
    for _ in range(3):
        logits = rng.standard_normal((1, rules.n_vocab)).astype(np.float32) * 4
        logits[0, rng.choice(languages, 20)] += 30  # some languages likelier than any other token
        want = int(languages[np.argmax(logits[0, languages])])
        (token,) = select_in_lockstep(gpu_ops, cpu_ops, rules, 1, logits[None])
        assert token == want and tokenizer.language_code(want) in tokenizer.language_tokens()


@pytest.fixture(scope="module")
def model_file():
    return ModelFile(TINY_EN_GGUF)


@pytest.fixture(scope="module")
def tokenizer(model_file):
    meta = model_file.metadata
    return Tokenizer(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"], meta["tokenizer.ggml.token_type"])


@needs_clips("cards/004.wav", "cards/001.wav")
@pytest.mark.gpu
def test_second_window_allocates_nothing(gpu_ops, model_file, tokenizer, monkeypatch):
    """The second window (encoder, prefill, batches of decoder steps) creates no bind group and takes
    no new buffer from the pool: every tensor is allocated once or comes back in the same order.
    Its batches of steps record the same dispatches, so the later ones are replayed."""
    monkeypatch.setattr(gpu_ops, "decode_steps_per_read", 2)  # several batches from a few tokens
    model = WhisperModel(model_file, gpu_ops)
    filterbank, window = model_file.array("frontend.mel_filterbank"), model_file.array("frontend.window")

    def transcribe(clip: str):  # short clips of a few tokens, so that the test stays short on lavapipe
        mel = log_mel(load_audio(AUDIO / clip), filterbank, window, n_frames=3000)
        return decode_window(model, tokenizer, model.encode(mel))

    assert tokenizer.decode(transcribe("cards/004.wav").tokens).strip() == "5 5"
    recorder, pool = gpu_ops.recorder, gpu_ops.pool
    before = dict(recorder.stats)
    allocated = pool.allocated_bytes
    second = transcribe("cards/001.wav")
    assert tokenizer.decode(second.tokens).strip() == "10 of clubs."
    assert recorder.stats["bind_groups_created"] == before["bind_groups_created"]
    assert pool.allocated_bytes == allocated
    # Submissions: the encoder (the prefill's id upload sends it), the SOT prefill (read back), the
    # first choice, then one per batch of steps up to EOT's and the one recorded ahead of its read;
    # no step reads anything back on its own.
    batches = -(-len(second.tokens) // gpu_ops.decode_steps_per_read)  # choices after the first, with EOT
    assert recorder.stats["submissions"] - before["submissions"] == 3 + batches + 1
    assert recorder.stats["replayed"] > before["replayed"]  # the batches after two that agreed
