"""The dictation flow's state rule (``app.core.dictation``): a take under way comes first, then errors
and loading."""

import pytest

from sayso.app.core.dictation import DictationState, FlowFacts, dictation_state

READY = dict(recording=False, finishing=False, model_ready=True)


@pytest.mark.parametrize("facts, state", [
    (FlowFacts(**READY), DictationState.READY),
    (FlowFacts(**{**READY, "model_ready": False}), DictationState.LOADING),
    (FlowFacts(**{**READY, "load_error": "damaged"}), DictationState.ERROR),
    (FlowFacts(**{**READY, "microphone_error": "no microphone"}), DictationState.ERROR),
    (FlowFacts(**{**READY, "model_ready": False, "microphone_error": "no microphone"}), DictationState.LOADING),
    (FlowFacts(**{**READY, "recording": True, "finishing": True, "load_error": "x"}), DictationState.RECORDING),
    (FlowFacts(**{**READY, "finishing": True, "model_ready": False}), DictationState.TRANSCRIBING),
])  # fmt: skip
def test_the_state_follows_the_rule(facts, state):
    assert dictation_state(facts) is state and state == state.value  # a str: shown by its value
