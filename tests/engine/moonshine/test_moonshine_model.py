"""Moonshine tiny and base on the numpy backend against the references: the same text as transcribe.cpp
on the same GGUF file for every clip of the shared audio, the same tokens as the original ONNX Runtime
model, word error rates against the reference transcripts; and one short clip on the GPU backend."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from support.data import AUDIO, needs_clips
from sayso.engine import audio, families
from sayso.engine.accuracy import NEAR_TIE_LOGITS, Evaluator, clip_lines, read_clips, summary, telephone_band
from sayso.engine.errors import SaysoError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.moonshine.decode import greedy_decode, token_limit
from sayso.engine.moonshine.model import MIN_SAMPLES, encoder_length
from sayso.engine.wer import count_errors

VARIANTS = ("moonshine-tiny", "moonshine-base")
MAX_WER = {"moonshine-tiny": 0.04, "moonshine-base": 0.05}
"""Above the models' measured rates on the shared clips (docs/PERFORMANCE.md: Current standing), base
writing "29340" for "two nine three four zero": the bound catches a broken model, not a point of
accuracy."""


def clips() -> list[dict[str, str]]:
    with open(AUDIO / "transcripts.tsv", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="module")
def transcribers(moonshine_q8, cpu_ops):
    return {name: families.load(ModelFile(path), cpu_ops) for name, path in moonshine_q8.items()}


@pytest.mark.parametrize(("variant", "audio_set"), [
    pytest.param(variant, audio_set, marks=[pytest.mark.slow] if audio_set == "telephone" else [], id=f"{variant}-{audio_set}")
    for variant in VARIANTS for audio_set in ("clips", "telephone")])
def test_every_clip_equals_transcribe_cpp_and_word_error_rate(variant, audio_set, moonshine_q8):
    """Each clip (or its telephone-band version) cut into pieces as the engine cuts it; each piece
    through Sayso and transcribe.cpp (``engine.accuracy``): the texts are equal or part at a near-tie of
    our decoder, and outside near-ties our word errors are no more than transcribe.cpp's."""
    transform = telephone_band if audio_set == "telephone" else None
    evaluator = Evaluator(str(moonshine_q8[variant]), device="cpu", transform=transform)
    results = [evaluator.evaluate(AUDIO, clip) for clip in read_clips(AUDIO)]
    print("\n" + "\n".join(line for result in results for line in clip_lines(result)))
    for result in results:
        assert result.equal or result.divergence.near_tie, f"{result.file}: not a near-tie, a real difference"
    count = summary(results)
    print(f"{variant}, {audio_set}: WER {100 * count['wer_ours']:.2f}% ({count['errors_ours']} errors in "
          f"{count['reference_words']} words), transcribe.cpp {100 * count['wer_theirs']:.2f}%")
    assert count["decided_errors_ours"] <= count["decided_errors_theirs"]
    if audio_set == "clips":
        assert count["wer_ours"] <= MAX_WER[variant]


def test_a_difference_is_measured_on_both_sides_at_the_first_token_and_on_ours_after(moonshine_q8):
    """Where a transcript parts from ours, our piece is decoded again forced through our tokens up to
    that step. transcribe.cpp's Moonshine takes no forced prefix, so its side is measured only where the
    texts part at the first token, from its first decoder step."""
    evaluator = Evaluator(str(moonshine_q8["moonshine-tiny"]), device="cpu")
    pcm = audio.load_audio(AUDIO / "jfk.wav")
    ours = evaluator.engine.transcribe(pcm)
    assert ours.text.startswith("And so my fellow Americans")
    divergence = evaluator.moonshine_divergence(ours, [(0.0, pcm)], [ours.text.replace("fellow", "yellow")])
    assert (divergence.window, divergence.ours.strip(), divergence.their_margin) == (0, "fellow", None)
    assert divergence.margin > NEAR_TIE_LOGITS and not divergence.near_tie

    first = evaluator.moonshine_divergence(ours, [(0.0, pcm)], [ours.text.removeprefix("And ").capitalize()])
    assert (first.step, first.ours.strip(), first.theirs.strip()) == (0, "And", "So")
    assert first.their_margin < 0 and first.disagreement == first.margin  # transcribe.cpp too prefers "And"
    assert evaluator.moonshine_divergence(ours, [(0.0, pcm)], [ours.text]) is None


def ort_greedy(src: Path, pcm: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The original model through onnxruntime, decoded greedily as Moonshine's runtimes do:
    (token ids without </s>, encoder states [T, d])."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    encoder = ort.InferenceSession(str(src / "encoder_model.ort"), options)
    decoder = ort.InferenceSession(str(src / "decoder_model_merged.ort"), options)
    mask = np.ones((1, len(pcm)), np.int64)
    feeds = {"input_values": pcm[None], "attention_mask": mask}
    states = encoder.run(None, {i.name: feeds[i.name] for i in encoder.get_inputs()})[0]
    inputs = {i.name: i.shape for i in decoder.get_inputs()}
    past = {n: np.zeros((1, s[1], 0, s[3]), np.float32) for n, s in inputs.items() if n.startswith("past_key_values")}
    tokens, token = [], 1
    for step in range(token_limit(len(pcm) / 16000, 194)):
        feeds = {"input_ids": np.array([[token]], np.int64), "encoder_hidden_states": states,
                 "use_cache_branch": np.array([step > 0]), "encoder_attention_mask": mask, **past}  # fmt: skip
        logits, *present = decoder.run(None, {name: feeds[name] for name in inputs})
        token = int(logits[0, -1].argmax())
        if token == 2:
            break
        tokens.append(token)
        for name, value in zip(past, present):
            if step == 0 or ".decoder." in name:  # cross-attention keys and values are computed once
                past[name] = value
    return tokens, states[0]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("clip", ["jfk.wav", "beckett.wav", "cards/005.wav", "commands/goforward.wav"])
def test_tokens_equal_the_original_onnx_runtime_model(variant, clip, moonshine_ort, transcribers):
    """Same greedy tokens as Moonshine's own 8-bit model; encoder states pointing the same way
    (theirs quantize activations to 8 bits on the fly, ours keep them float)."""
    model = transcribers[variant].model
    pcm = audio.load_audio(AUDIO / clip)
    encoded = model.encode(pcm)
    tokens, probs = greedy_decode(model, encoded, len(pcm) / 16000)
    expected, states = ort_greedy(moonshine_ort[variant], pcm)
    assert tokens == expected
    assert all(0 < p <= 1 for p in probs)
    ours = np.asarray(encoded.states)
    assert ours.shape == states.shape == (encoder_length(len(pcm)), model.config.d_model)
    cosine = (ours * states).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(states, axis=1)
    assert cosine.mean() > 0.998


def test_segment_tokens_spread_over_the_piece(transcribers):
    pcm = audio.load_audio(AUDIO / "jfk.wav")
    segments, _ = transcribers["moonshine-tiny"].transcribe(pcm, offset=12.5)
    [segment] = segments
    assert (segment.start, segment.end) == (12.5, 12.5 + len(pcm) / 16000)
    starts = [t.start for t in segment.tokens]
    assert starts[0] == 12.5 and starts == sorted(starts) and starts[-1] < segment.end
    assert "".join(t.text for t in segment.tokens).strip() == segment.text


@needs_clips("cards/001.wav")
def test_short_pieces_and_what_moonshine_cannot_do(transcribers):
    tiny = transcribers["moonshine-tiny"]
    assert MIN_SAMPLES == 895 and encoder_length(MIN_SAMPLES) == 1 and encoder_length(MIN_SAMPLES - 1) == 0
    assert tiny.transcribe(np.zeros(MIN_SAMPLES - 1, np.float32)) == ([], "en")
    assert tiny.transcribe(np.zeros(16000, np.float32))[1] == "en"  # a second of silence decodes without error
    with pytest.raises(SaysoError, match="only transcribes"):
        tiny.transcribe(np.zeros(16000, np.float32), task="translate")
    pcm = audio.load_audio(AUDIO / "cards" / "001.wav")  # English-only: a language setting changes nothing
    assert tiny.transcribe(pcm, language="de", prompt="Spades.") == tiny.transcribe(pcm)


def test_decoding_stops_at_six_and_a_half_tokens_a_second():
    assert token_limit(1.0, 194) == 7
    assert token_limit(0.06, 194) == 1
    assert token_limit(60.0, 194) == 193  # the start token takes one of the 194 positions


@needs_clips("two_cities.wav")
def test_engine_transcribes_a_long_file_in_pieces(moonshine_q8):
    """Through the engine's front door: the family is found by general.architecture, and 44 s of
    audio is cut into two pieces at a pause, with the second piece's time offset."""
    from sayso.engine.engine import Engine

    engine = Engine(moonshine_q8["moonshine-tiny"], device="cpu")
    assert engine.model_name == "moonshine-tiny"
    result = engine.transcribe_file(AUDIO / "two_cities.wav")
    assert len(result.segments) == 2 and 25 < result.segments[1].start < 30
    reference = next(c["reference"] for c in clips() if c["file"] == "two_cities.wav")
    assert count_errors(reference, result.text).errors <= 3


@needs_clips("cards/001.wav")
@pytest.mark.gpu
def test_short_clip_on_the_gpu_equals_the_numpy_backend(moonshine_q8, gpu_ops, transcribers):
    pcm = audio.load_audio(AUDIO / "cards" / "001.wav")
    [on_gpu], _ = families.load(ModelFile(moonshine_q8["moonshine-tiny"]), gpu_ops).transcribe(pcm)
    [on_cpu], _ = transcribers["moonshine-tiny"].transcribe(pcm)
    assert on_gpu.text == on_cpu.text == "Ten of clubs."
    assert [t.id for t in on_gpu.tokens] == [t.id for t in on_cpu.tokens]
    assert [t.probability for t in on_gpu.tokens] == pytest.approx([t.probability for t in on_cpu.tokens], abs=0.02)
