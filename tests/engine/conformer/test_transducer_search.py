"""A transducer's greedy search on the backend (``engine.conformer.search``) against the host search
(``engine.conformer.heads``): the step kernels case by case against their numpy oracle, and whole
searches of random-weight TDT and RNN-T heads on real speech, on the numpy backend and on the GPU.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from support.data import AUDIO, needs_clips

from sayso.engine.audio import load_audio
from sayso.engine.conformer.search import BackendTransducerHead, load_backend_transducer
from sayso.engine.convert.random_model import write_random_model
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import TRANSDUCER_HEADER, WeightSource

BLANK = 9  # tokens 0..9, the blank last
DURATIONS = [0, 1, 2, 3, 4]
FRAMES = 6


def logits_for(token: int, duration_index: int | None = None, width: int = BLANK + 1) -> np.ndarray:
    """Logits [1, tokens (+ durations)] where ``token`` wins with a margin (and ``duration_index``)."""
    row = np.linspace(-1.0, 0.0, width, dtype=np.float32)
    row[token] = 3.0
    if duration_index is not None:
        durations = np.zeros(len(DURATIONS), np.float32)
        durations[duration_index] = 2.0
        row = np.concatenate([row, durations])
    return row[None, :]


def run_choices(ops, choices: list[np.ndarray], durations: list[int] | None, max_symbols: int, capacity: int = 8):
    """Apply ``choices`` (logits) one after another; the state's words and ids after each."""
    state = ops.transducer_state(capacity)
    ids = ops.ids(np.zeros(1, np.uint32))
    durations_tensor = ops.ids(np.array(durations, np.uint32)) if durations else None
    seen = []
    for logits in choices:
        ops.transducer_choose(ops.tensor(logits), durations_tensor, state, ids, FRAMES, BLANK + 1, max_symbols)
        seen.append((ops.read(state).tolist(), ops.read(ids).tolist()))
    return seen


TDT_CASES = {
    # a token of duration 2, then a blank of duration 0 (moves one frame), then a token of duration 0
    # twice with max_symbols 2 (the second moves on), then past the last frame (nothing changes)
    "durations and the symbol limit": [logits_for(4, 2), logits_for(BLANK, 0), logits_for(7, 0), logits_for(7, 0),
                                       logits_for(1, 4), logits_for(2, 1)],
    "ties pick the first": [np.zeros((1, BLANK + 1 + len(DURATIONS)), np.float32)] * 3,
}
RNNT_CASES = {
    "tokens stay, blanks move on": [logits_for(3), logits_for(3), logits_for(BLANK), logits_for(5), logits_for(BLANK)],
    "the symbol limit moves on": [logits_for(2)] * 5,
}


@pytest.mark.parametrize("case", TDT_CASES)
def test_a_tdt_step_follows_the_host_rules(case, cpu_ops):
    seen = run_choices(cpu_ops, TDT_CASES[case], DURATIONS, max_symbols=2)
    if case == "durations and the symbol limit":
        frames = [words[0][0] for words, _ in seen]
        assert frames == [2, 3, 3, 4, 8, 8]  # the last duration jumps past the end
        words = seen[-1][0][0]
        emissions = np.array(words[TRANSDUCER_HEADER:], np.uint32).reshape(-1, 4)[: words[2]]
        assert emissions[:, :3].tolist() == [[4, 0, 2], [7, 3, 0], [7, 3, 0], [1, 4, 4]]
        assert [w[0][3] for w, _ in seen] == [1, 0, 1, 1, 1, 0]  # the predictor's flag; cleared at the end
    else:  # token 0 of duration 0 on every step, the limit moving on every second step
        assert [words[0][:3] for words, _ in seen] == [[0, 1, 1], [1, 0, 2], [1, 1, 3]]


@pytest.mark.parametrize("case", RNNT_CASES)
def test_an_rnnt_step_follows_the_host_rules(case, cpu_ops):
    seen = run_choices(cpu_ops, RNNT_CASES[case], None, max_symbols=3)
    header = [words[0][:3] for words, _ in seen]
    if case == "tokens stay, blanks move on":
        assert header == [[0, 1, 1], [0, 2, 2], [1, 0, 2], [1, 1, 3], [2, 0, 3]]
        assert [ids for _, ids in seen] == [[3], [3], [3], [5], [5]]
    else:
        assert header == [[0, 1, 1], [0, 2, 2], [1, 0, 3], [1, 1, 4], [1, 2, 5]]


def test_a_full_state_ends_the_search(cpu_ops):
    seen = run_choices(cpu_ops, [logits_for(2)] * 3, None, max_symbols=0, capacity=2)
    assert [words[0][:3] for words, _ in seen] == [[0, 1, 1], [FRAMES, 2, 2], [FRAMES, 2, 2]]


@pytest.mark.gpu
@pytest.mark.parametrize("durations", [DURATIONS, None], ids=["tdt", "rnnt"])
def test_the_gpu_steps_are_numpys(durations, cpu_ops, gpu_ops):
    """Every case's states and ids, word for word (probabilities within float32 rounding)."""
    cases = TDT_CASES if durations else RNNT_CASES
    for choices in cases.values():
        for capacity in (2, 8):
            ours = run_choices(gpu_ops, choices, durations, 2, capacity)
            oracle = run_choices(cpu_ops, choices, durations, 2, capacity)
            for (words, ids), (want_words, want_ids) in zip(ours, oracle):
                words, want_words = np.array(words, np.uint32), np.array(want_words, np.uint32)
                mask = np.ones(words.shape, bool)
                mask[0, TRANSDUCER_HEADER + 3 :: 4] = False  # the probability, word 3 of each emission
                assert ids == want_ids and np.array_equal(words[mask], want_words[mask])
                np.testing.assert_allclose(words[0, TRANSDUCER_HEADER + 3 :: 4].view(np.float32),
                                           want_words[0, TRANSDUCER_HEADER + 3 :: 4].view(np.float32), rtol=1e-5)


@pytest.mark.gpu
def test_the_gpu_hidden_layer_and_lstm_cell_are_numpys(cpu_ops, gpu_ops):
    rng = np.random.default_rng(3)
    encoder, prediction = rng.normal(size=(FRAMES, 40)).astype(np.float32), rng.normal(size=(1, 40)).astype(np.float32)
    gates = (3 * rng.normal(size=(1, 4 * 24))).astype(np.float32)
    c0, h0 = rng.normal(size=(1, 24)).astype(np.float32), rng.normal(size=(1, 24)).astype(np.float32)
    table = rng.normal(size=(7, 4 * 24)).astype(np.float32)  # input gates per token, looked up by the cell
    for emitted, looked_up in ((0, False), (1, False), (1, True)):
        results = []
        for ops in (cpu_ops, gpu_ops):
            state = ops.transducer_state(4)
            choice = ops.tensor(logits_for(4 if emitted else BLANK))
            ops.transducer_choose(choice, None, state, ops.ids(np.zeros(1)), FRAMES, BLANK + 1, 0)
            hidden = {a: ops.read(ops.joint_hidden(ops.tensor(encoder), ops.tensor(prediction), state, a))
                      for a in ("relu", "tanh", "sigmoid")}
            c, h = ops.tensor(c0), ops.tensor(h0)
            input_gates = (ops.weight(WeightSource("input_gates", "F32", table.shape, table)),
                           ops.ids(np.array([5]))) if looked_up else None
            ops.lstm_cell(ops.tensor(gates), state, c, h, input_gates)
            results.append((hidden, ops.read(c), ops.read(h)))
        (want_hidden, want_c, want_h), (hidden, c, h) = results
        for activation in want_hidden:
            np.testing.assert_allclose(hidden[activation], want_hidden[activation], atol=1e-6)
        np.testing.assert_allclose(c, want_c, atol=1e-6)
        np.testing.assert_allclose(h, want_h, atol=1e-6)
        assert np.array_equal(c, c0) != bool(emitted)  # the cell changes only after an emission
        if looked_up:  # the looked-up row is added: the gates alone give another cell
            i_gate, f_gate, g_gate, _ = np.split(gates[0] + table[5], 4)
            sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
            np.testing.assert_allclose(c[0], sigmoid(f_gate) * c0[0] + sigmoid(i_gate) * np.tanh(g_gate), atol=1e-5)


FAMILIES = {"parakeet-tdt-v3": "parakeet", "gigaam-v3-rnnt": "gigaam"}
CLIPS = ["beckett.wav", "librivox/sense_and_sensibility_01_austen_64kb-0920.wav"]


@pytest.fixture(scope="module", params=FAMILIES)
def small_model(request, tmp_path_factory):
    path = write_random_model(request.param, tmp_path_factory.mktemp("search") / f"{request.param}.gguf", small=True)
    return FAMILIES[request.param], path


def searches(family: str, path, ops):
    """The family's transcriber of the model at ``path`` on ``ops``."""
    return importlib.import_module(f"sayso.engine.{family}").load(ModelFile(path), ops)


def as_rows(emissions) -> list[tuple[int, int, int]]:
    return [(e.id, e.frame, e.duration) for e in emissions]


@needs_clips(*CLIPS)
@pytest.mark.parametrize("clip", CLIPS)
def test_the_backend_search_is_the_host_search(small_model, clip, cpu_ops):
    """On the numpy backend: the same emissions, probabilities included, as the host's loop."""
    family, path = small_model
    transcriber = searches(family, path, cpu_ops)
    head = transcriber.model.head
    with cpu_ops.loading():
        backend = load_backend_transducer(ModelFile(path), cpu_ops, len(head.predictor.layers), head.activation,
                                          head.blank, head.durations, head.max_symbols)
    states = transcriber.model.encode(transcriber.frontend(load_audio(AUDIO / clip)))
    host, ours = head.decode(cpu_ops, states), backend.decode(cpu_ops, states)
    assert len(host) > 0 and as_rows(ours) == as_rows(host)
    np.testing.assert_allclose([e.probability for e in ours], [e.probability for e in host], rtol=1e-5)


@needs_clips(*CLIPS)
@pytest.mark.gpu
@pytest.mark.parametrize("clip", CLIPS)
def test_the_gpu_search_is_the_host_search(small_model, clip, cpu_ops, gpu_ops):
    """On the GPU the head searches there; on the same encoder states it emits what the host does."""
    family, path = small_model
    on_cpu, on_gpu = searches(family, path, cpu_ops), searches(family, path, gpu_ops)
    assert isinstance(on_gpu.model.head, BackendTransducerHead)
    states = on_cpu.model.encode(on_cpu.frontend(load_audio(AUDIO / clip)))
    host = on_cpu.model.head.decode(cpu_ops, states)
    ours = on_gpu.model.head.decode(gpu_ops, gpu_ops.tensor(cpu_ops.read(states)))
    assert len(host) > 0 and as_rows(ours) == as_rows(host)
