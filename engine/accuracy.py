"""Accuracy of our Whisper against transcribe.cpp on the shared clips, with the cause of every difference.

    python -m engine.accuracy MODEL [--device cpu|gpu] [--json] [--vad] [--audio DIR]

For each clip of ``DIR/transcripts.tsv`` (default ``$SAYSO_SHARED/audio``, else the checkout's sibling
``../shared/audio``) the whole file is transcribed by our ``Engine`` (so a clip over 30 s takes the
long-audio path: cut at a quiet moment, windows resumed at the last closed segment) and by
transcribe.cpp on the same GGUF file and the same audio (16 kHz mono from ``engine.audio.load_audio``).
The engine's VAD trimming is off unless ``--vad`` is given, so both decoders hear the same samples.

Where the texts differ, the first differing token is located and our decoder's logits at that step are
looked up (they were recorded while the engine ran): both decoders are greedy, so a difference that
starts where our two best tokens are nearly tied is rounding (Q8_0 dot products, float16 caches,
summation order), not a bug. A difference is a
**near-tie** when, at that step and after the logit rules, our pick's logit exceeds transcribe.cpp's
pick's logit by less than ``NEAR_TIE_LOGITS`` (0.5, about a 1.65x probability ratio). Their pick is
usually our runner-up, and then this margin is the top-2 margin; it can't be smaller than that one.

transcribe.cpp returns text, not token ids, so texts are compared byte by byte: the first differing
step is the first of our sampled text tokens that doesn't continue transcribe.cpp's text, and its pick
there is taken as the token our model scores highest among those that do continue it (EOT or a
timestamp where its text ended). That favours transcribe.cpp's side, so a verdict of "not a near-tie"
is never an artefact of guessing its tokens. (Re-encoding its text would also be wrong for models
whose tokenizer lacks a BPE merge, as whisper-base's does.) Our side's logits are the ones the engine
computed: the transcriber's model is wrapped by ``WindowRecorder``, which keeps every step's logits of
every window the engine decoded, so nothing is decoded twice.

Word error rates against the references use ``engine.wer`` (its docstring gives the normalisation) and
are pooled over all clips.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine import models
from engine.audio import load_audio
from engine.backend import DeviceChoice
from engine.cpu.ops import whisper_allowed_logits
from engine.engine import Engine
from engine.errors import SaysoError
from engine.ops import WhisperRules
from engine.transcript import Transcript
from engine.wer import ErrorCount, count_errors
from engine.whisper import WhisperTranscriber
from engine.whisper.decode import WINDOW_SECONDS, DecodingResult, logit_rules, split_segments
from engine.whisper.model import WhisperModel
from engine.whisper.tokenizer import Tokenizer

NEAR_TIE_LOGITS = 0.5
"""A difference is a near-tie when our pick beat transcribe.cpp's by less than this many logits."""


def default_audio_dir() -> Path:
    """``$SAYSO_SHARED/audio``, else ``../shared/audio`` beside this checkout."""
    shared = os.environ.get("SAYSO_SHARED")
    return (Path(shared) if shared else Path(__file__).resolve().parents[1].parent / "shared") / "audio"


@dataclass(frozen=True)
class Clip:
    """One row of ``transcripts.tsv``: the file (relative to the audio folder) and its reference text."""

    file: str
    reference: str


def read_clips(audio_dir: Path) -> list[Clip]:
    with open(audio_dir / "transcripts.tsv", newline="") as f:
        return [Clip(row["file"], row["reference"]) for row in csv.DictReader(f, delimiter="\t")]


@dataclass
class Divergence:
    """Where our output first leaves transcribe.cpp's text: window ``window`` of the ones the engine
    decoded, sampling step ``step`` of that window (timestamps count as steps).

    ``ours``/``theirs``: the two picks as token text (``theirs`` as explained in the module docstring);
    ``top2``: our two best tokens and their logits after the logit rules; ``margin``: our pick's logit
    minus theirs (infinite when the rules forbid every token that continues their text).
    """

    window: int
    step: int
    ours: str
    theirs: str
    top2: list[tuple[str, float]]
    margin: float

    @property
    def near_tie(self) -> bool:
        return self.margin < NEAR_TIE_LOGITS


@dataclass
class ClipResult:
    """Both transcripts of one clip, their word errors against the reference, and where they part."""

    file: str
    reference: str
    ours: str
    theirs: str
    ours_errors: ErrorCount
    theirs_errors: ErrorCount
    divergence: Divergence | None = None  # set when the texts differ

    @property
    def equal(self) -> bool:
        return self.ours == self.theirs


class WindowRecorder:
    """Stands in for the transcriber's ``WhisperModel``: every call passes through, and the logits of
    each decoding step are kept (read back as numpy [n_vocab]), window by window, in the order the
    engine decoded them (``clear`` between clips).

    A window starts at ``encode``; its step 0 logits are those of the last ``prefill`` (the end of the
    SOT sequence), step k's those of the k-th ``step_logits`` (after the k-th sampled token). On a GPU
    the read-backs cost a sync per step; what is computed is the same.
    """

    def __init__(self, model: WhisperModel):
        self.model = model
        self.windows: list[list[np.ndarray]] = []

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def encode(self, mel: np.ndarray):
        self.windows.append([])
        return self.model.encode(mel)

    def prefill(self, state, token_ids: list[int]):
        logits = self.model.prefill(state, token_ids)
        self.windows[-1][:] = [self.model.ops.read(logits)[0]]
        return logits

    def step_logits(self, state, ids):
        logits = self.model.step_logits(state, ids)
        self.windows[-1].append(self.model.ops.read(logits)[0])
        return logits

    def clear(self) -> None:
        self.windows.clear()


def greedy_tokens(steps: list[np.ndarray], rules: WhisperRules) -> tuple[list[int], list[np.ndarray]]:
    """The tokens a window's recorded step logits give under the logit rules (EOT excluded), and each
    step's logits after the rules (float64, -inf where a rule forbids a token), EOT's step included.

    This is the numpy oracle of ``Ops.whisper_select`` run again on the engine's own logits, so a
    backend whose selection disagrees with the rules shows up as a transcript that can't be matched.
    """
    tokens: list[int] = []
    allowed_steps = []
    for logits in steps:
        allowed = whisper_allowed_logits(logits, rules, tokens)
        allowed_steps.append(allowed)
        token = int(np.argmax(allowed))
        if token == rules.eot:
            break
        tokens.append(token)
    return tokens, allowed_steps


def kept_tokens(tokenizer: Tokenizer, windows: list[list[int]], transcript: Transcript) -> list[tuple[int, int, bool]]:
    """(window, step, opens a segment) of every text token of ``transcript``, in order; ``windows``:
    each window's sampled tokens.

    A window's segments (``split_segments``) are in the transcript unless the window was dropped as
    silence; a cut-off window's unfinished tail is in no segment. Raises if the windows don't give the
    transcript's segments.
    """
    wanted = [[token.id for token in segment.tokens] for segment in transcript.segments]
    found_at = 0
    kept = []
    for window, tokens in enumerate(windows):
        result = DecodingResult(tokens, [0.0] * len(tokens), 0.0, 0.0, transcript.language)
        segments, _ = split_segments(tokenizer, result, 0.0, WINDOW_SECONDS)
        ids = [[token.id for token in segment.tokens] for segment in segments]
        if not ids or ids != wanted[found_at : found_at + len(ids)]:
            continue  # dropped as no speech
        found_at += len(ids)
        text_steps = iter(step for step, token in enumerate(tokens) if not tokenizer.is_special(token))
        kept += [(window, next(text_steps), i == 0) for segment in ids for i in range(len(segment))]
    if found_at != len(wanted):
        raise SaysoError("The recorded logits, under the logit rules, don't give the engine's transcript: "
                         "the backend's token selection disagrees with engine.cpu.ops.whisper_allowed_logits.")
    return kept


class Evaluator:
    """One Whisper model loaded in our engine (on ``device``) and in transcribe.cpp, compared clip by clip.

    ``vad``: trim each piece to its speech first, as the app does. Off by default, so that both decoders
    hear the same audio; with it the near-tie analysis still runs, but a trimmed window is another input
    and its differences say nothing about rounding.
    """

    def __init__(self, model: str, device: DeviceChoice = "cpu", vad: bool = False):
        import transcribe_cpp  # the reference is needed here only, not by the app

        self.path = models.resolve(model)
        self.vad = vad
        self.engine = Engine(self.path, device=device, vad=vad)
        transcriber = self.engine.transcriber
        if not isinstance(transcriber, WhisperTranscriber):
            raise SaysoError(f"{model} isn't a Whisper model; engine.accuracy compares Whisper models only.")
        self.tokenizer = transcriber.tokenizer
        self.recorder = WindowRecorder(transcriber.model)
        transcriber.model = self.recorder
        self.reference = transcribe_cpp.Model(str(self.path))

    def describe(self) -> str:
        trimmed = ", pieces trimmed to speech (VAD)" if self.vad else ""
        return f"{self.engine.describe()}{trimmed} vs transcribe.cpp, {self.path.name}"

    def evaluate(self, audio_dir: Path, clip: Clip) -> ClipResult:
        path = audio_dir / clip.file
        self.recorder.clear()
        ours = self.engine.transcribe_file(path)
        theirs = self.reference.session().run(load_audio(path))
        result = ClipResult(clip.file, clip.reference, ours.text, theirs.text,
                            count_errors(clip.reference, ours.text), count_errors(clip.reference, theirs.text))
        if not result.equal:
            result.divergence = self.first_divergence(ours, theirs.text)
        return result

    def first_divergence(self, ours: Transcript, theirs: str) -> Divergence | None:
        """Our logits where our sampled text first leaves the text ``theirs`` (None if it never does, or
        if the engine decoded no window at all)."""
        tokenizer = self.tokenizer
        if not self.recorder.windows:
            return None
        rules = logit_rules(self.recorder.model.config, tokenizer, timestamps=True)
        tokens, allowed = zip(*(greedy_tokens(steps, rules) for steps in self.recorder.windows))
        kept = kept_tokens(tokenizer, list(tokens), ours)
        their_bytes = f" {theirs.strip()}".encode() if theirs.strip() else b""  # our segments open with a space token
        at = 0  # bytes of their text matched so far
        for window, step, opens_segment in kept:
            piece = tokenizer.token_bytes(tokens[window][step])
            if opens_segment and not piece.startswith(b" ") and their_bytes.startswith(b" ", at):
                at += 1  # the transcript joins segments with a space
            if not their_bytes.startswith(piece, at):
                break
            at += len(piece)
        else:
            if at == len(their_bytes):
                return None  # same text up to spacing
            window, step = (kept[-1][0], kept[-1][1] + 1) if kept else (0, 0)  # our text ended first: the next step

        logits = allowed[window][step]
        ours_id, runner_up = (int(i) for i in np.argsort(-logits, kind="stable")[:2])  # first index on ties, as argmax
        theirs_id = max(self.continuations(their_bytes[at:]), key=lambda t: logits[t])
        return Divergence(
            window, step, tokenizer.token_text(ours_id), tokenizer.token_text(theirs_id),
            [(tokenizer.token_text(i), float(logits[i])) for i in (ours_id, runner_up)],
            float(logits[ours_id] - logits[theirs_id]),
        )

    def continuations(self, rest: bytes) -> list[int]:
        """Token ids that could come next in a text whose remaining bytes are ``rest``: the text tokens
        that start it, or EOT and the timestamps when nothing remains."""
        tokenizer, config = self.tokenizer, self.recorder.model.config
        if not rest:
            return [config.eot, *range(tokenizer.timestamp_begin, config.n_vocab)]
        texts = ((t, tokenizer.token_bytes(t)) for t in range(tokenizer.timestamp_begin) if not tokenizer.is_special(t))
        return [t for t, text in texts if text and rest.startswith(text)]


def summary(results: list[ClipResult]) -> dict:
    """Clip counts and pooled word error rates."""
    differ = [r for r in results if not r.equal]
    ours = sum((r.ours_errors for r in results), ErrorCount())
    theirs = sum((r.theirs_errors for r in results), ErrorCount())
    return {
        "clips": len(results),
        "equal": len(results) - len(differ),
        "near_ties": sum(1 for r in differ if r.divergence is not None and r.divergence.near_tie),
        "not_near_ties": sum(1 for r in differ if r.divergence is None or not r.divergence.near_tie),
        "near_tie_logits": NEAR_TIE_LOGITS,
        "wer_ours": ours.rate, "errors_ours": ours.errors,
        "wer_theirs": theirs.rate, "errors_theirs": theirs.errors,
        "reference_words": ours.words,
    }


def clip_lines(r: ClipResult) -> list[str]:
    """One clip's part of the report: both texts, the first difference and its verdict, word errors."""
    lines = [f"{r.file}: {'equal' if r.equal else 'DIFFERENT'}", f"  ours:   {r.ours}", f"  theirs: {r.theirs}"]
    d = r.divergence
    if d is not None:
        top2 = ", ".join(f"{text!r} {logit:.3f}" for text, logit in d.top2)
        verdict = f"near-tie (< {NEAR_TIE_LOGITS})" if d.near_tie else f"NOT a near-tie (>= {NEAR_TIE_LOGITS})"
        lines.append(f"  first difference: window {d.window} step {d.step}: ours {d.ours!r}, theirs {d.theirs!r}; "
                     f"our top-2 {top2}; margin {d.margin:.3f}: {verdict}")
    elif not r.equal:
        lines.append("  no sampled token differs: the texts differ in spacing, or no window was decoded")
    lines.append(f"  word errors: ours {r.ours_errors.errors}, theirs {r.theirs_errors.errors} "
                 f"of {r.ours_errors.words} words")
    return lines


def summary_lines(results: list[ClipResult]) -> list[str]:
    s = summary(results)
    return [f"{s['equal']}/{s['clips']} clips equal; {s['near_ties']} differences at a near-tie, "
            f"{s['not_near_ties']} other differences",
            f"WER over {s['reference_words']} reference words: ours {s['wer_ours']:.2%} ({s['errors_ours']} errors), "
            f"transcribe.cpp {s['wer_theirs']:.2%} ({s['errors_theirs']} errors)"]


def as_json(r: ClipResult) -> dict:
    """A clip's result for ``--json``; an infinite margin (no allowed continuation) becomes null."""
    out = {**asdict(r), "equal": r.equal, "near_tie": r.divergence.near_tie if r.divergence else None}
    if r.divergence is not None and not np.isfinite(r.divergence.margin):
        out["divergence"]["margin"] = None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model name (whisper-tiny.en, whisper-base) or .gguf path")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    parser.add_argument("--vad", action="store_true", help="trim our pieces to speech as the app does "
                        "(transcribe.cpp still hears the whole file)")
    parser.add_argument("--audio", type=Path, default=None, help="folder holding transcripts.tsv "
                        "(default: $SAYSO_SHARED/audio, else ../shared/audio beside the checkout)")
    args = parser.parse_args()
    audio_dir = args.audio or default_audio_dir()
    evaluator = Evaluator(args.model, args.device, vad=args.vad)
    if not args.json:
        print(evaluator.describe(), flush=True)
    results = []
    for clip in read_clips(audio_dir):
        results.append(evaluator.evaluate(audio_dir, clip))
        if not args.json:
            print("\n".join(clip_lines(results[-1])), flush=True)
    if args.json:
        json.dump({"model": args.model, "engine": evaluator.describe(), "summary": summary(results),
                   "clips": [as_json(r) for r in results]}, sys.stdout, indent=1)
        print()
    else:
        print("\n".join(["", *summary_lines(results)]))


if __name__ == "__main__":
    main()
