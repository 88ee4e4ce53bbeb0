"""The dictation flow's states, and the one rule that says which holds.

A take is recorded (``RECORDING``) from the shortcut's press to its release; from the release until
the engine's text is delivered the flow is ``TRANSCRIBING`` (also while earlier takes' jobs run);
otherwise it waits, ``READY`` once the model is loaded and a microphone is open, ``LOADING`` before,
``ERROR`` when the model or the microphone failed. Recording and transcribing come first: a take
under way is shown as such even while a new model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class DictationState(str, Enum):
    LOADING = "loading"
    READY = "ready"
    RECORDING = "recording"
    TRANSCRIBING = "transcribing"
    ERROR = "error"


@dataclass(frozen=True)
class FlowFacts:
    """What the state depends on, as the dictation flow knows it."""

    recording: bool  # a take is being recorded (pressed, not yet released)
    finishing: bool  # a released take, or earlier takes' jobs, not yet delivered
    model_ready: bool
    load_error: str = ""
    microphone_error: str = ""


def dictation_state(facts: FlowFacts) -> DictationState:
    if facts.recording:
        return DictationState.RECORDING
    if facts.finishing:
        return DictationState.TRANSCRIBING
    if facts.load_error:
        return DictationState.ERROR
    if not facts.model_ready:
        return DictationState.LOADING
    if facts.microphone_error:
        return DictationState.ERROR
    return DictationState.READY
