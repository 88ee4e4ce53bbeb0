"""Accuracy of our engine against transcribe.cpp on the shared clips, with the cause of every difference.

    python -m sayso.engine.accuracy MODEL [--device cpu|gpu] [--json] [--vad] [--telephone] [--audio DIR]

For each clip of ``DIR/transcripts.tsv`` (default ``$SAYSO_TEST_DATA/audio``, else the clips the
repository ships in ``tests/data/audio``) the audio (16 kHz mono from ``engine.audio.load_audio``; ``--telephone``: its
telephone-band version, ``telephone_band``) is transcribed by our ``Engine`` and by transcribe.cpp on
the same GGUF file. transcribe.cpp is handed exactly the PCM our engine transcribes. A Whisper clip goes
whole to both, each reading it window after window as its own decode moves them (the windows each ran
are counted for clips longer than one: ours from the engine, transcribe.cpp's from its profile); a
Moonshine clip is cut by the engine into pieces (``engine.segmenter``; one piece below 30 s), each run
on its own in transcribe.cpp and the texts joined.

Where the texts differ, the first differing token is located and both engines' logits at that step
are compared: both decoders are greedy, so a difference that starts where the two engines' best tokens
are nearly tied is rounding (Q8_0 dot products, each CPU's kernels, summation order), not a bug. A
difference is a **near-tie** when the two engines disagree about its two tokens by less than
``NEAR_TIE_LOGITS``: our pick's lead over transcribe.cpp's pick in our logits, plus transcribe.cpp's
pick's lead over ours in its logits after the same text (``their_margin``). transcribe.cpp's side is
read from its dumped logits (``TRANSCRIBE_DUMP_DIR``) in a run forced through the common text with its
``prefix`` option. A forced prefix is decoded without timestamps, so transcribe.cpp's lead there is
measured in a slightly other context than the one the texts parted in. Its Moonshine takes no prefix:
there its side is measured only where the texts part at the first token, from the first decoder step of
a plain run (a dump keeps a tensor's first value); elsewhere only our side counts.

transcribe.cpp returns text, not token ids, so texts are compared byte by byte: the first differing
step is the first of our sampled text tokens that doesn't continue transcribe.cpp's text, and its pick
there is taken as the token our model scores highest among those that do continue it (EOT or a
timestamp where its text ended). That favours transcribe.cpp's side, so a verdict of "not a near-tie"
is never an artefact of guessing its tokens. (Re-encoding its text would also be wrong for models
whose tokenizer lacks a BPE merge, as whisper-base's does.) Our side's logits are the ones the engine
computed: a Whisper transcriber's model is wrapped by ``WindowRecorder``, which keeps every step's
logits of every window the engine decoded, so nothing is decoded twice; a Moonshine piece is decoded
again, forced through our tokens, up to the step where the texts part.

Word error rates against the references use ``engine.wer`` (its docstring gives the normalisation) and
are pooled over all clips.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sayso.engine import models, reference
from sayso.engine.audio import load_audio
from sayso.engine.backend import DeviceChoice
from sayso.engine.cpu.ops import whisper_allowed_logits
from sayso.engine.engine import Engine
from sayso.engine.errors import SaysoError
from sayso.engine.moonshine import MoonshineTranscriber
from sayso.engine.ops import WhisperRules
from sayso.engine.segmenter import SAMPLE_RATE, pieces
from sayso.engine.transcript import Transcript
from sayso.engine.wer import ErrorCount, count_errors
from sayso.engine.whisper import WhisperTranscriber
from sayso.engine.whisper.decode import WINDOW_SECONDS, DecodingResult, logit_rules, split_segments
from sayso.engine.whisper.model import WhisperModel
from sayso.engine.whisper.tokenizer import Tokenizer

NEAR_TIE_LOGITS = 1.0
"""A difference is a near-tie when the engines' leads for their own picks add up to less than this many
logits (about a 2.7x probability ratio). Given the same tokens, the two engines' logit differences
between two tokens agree to within a few hundredths of a logit on one CPU; across CPUs each engine's
kernels change (ONNX Runtime's and ggml's builds for each instruction set), and one pick's lead moved
past half a logit."""

TELEPHONE_BAND = (300.0, 3400.0)  # Hz kept by a phone line, sampled at 8 kHz


def telephone_band(pcm: np.ndarray) -> np.ndarray:
    """16 kHz ``pcm`` as a phone line carries it: down to 8 kHz, only ``TELEPHONE_BAND`` kept (an FFT
    brick wall), back up to 16 kHz. Soft onsets get softer, which is what loses first words."""
    import soxr

    narrow = soxr.resample(pcm, SAMPLE_RATE, 8000)
    spectrum = np.fft.rfft(narrow)
    frequencies = np.fft.rfftfreq(len(narrow), 1 / 8000)
    low, high = TELEPHONE_BAND
    spectrum[(frequencies < low) | (frequencies > high)] = 0
    return soxr.resample(np.fft.irfft(spectrum, len(narrow)).astype(np.float32), 8000, SAMPLE_RATE)


def transcribe_cpp_run(model_path: Path, pcm: np.ndarray, folder: Path, prefix: str | None = None,
                       ) -> tuple[dict[str, np.ndarray], list[tuple[int, int]], str]:
    """transcribe.cpp on ``pcm`` in a process of its own with its tensors dumped into ``folder``
    (it reads ``TRANSCRIBE_DUMP_DIR`` once, when it loads): (tensor name -> array, tokens as (id, start
    ms), text). ``prefix``: text the decoder is forced through first."""
    np.save(folder / "pcm.npy", pcm)
    dumps_dir = folder / "dumps"
    dumps_dir.mkdir()
    script = ("import json, sys, numpy, transcribe_cpp; from sayso.engine import reference; "
              "r = reference.transcribe(transcribe_cpp.Model(sys.argv[1]), numpy.load(sys.argv[2]), "
              "prefix=sys.argv[3] or None); "
              "print(json.dumps([[(t.id, t.t0_ms) for t in r.tokens], r.text]))")
    env = dict(os.environ, TRANSCRIBE_DUMP_DIR=str(dumps_dir))
    run = subprocess.run([sys.executable, "-c", script, str(model_path), str(folder / "pcm.npy"), prefix or ""],
                         env=env, check=True, capture_output=True, text=True)
    dumps = {}
    for meta in dumps_dir.glob("*.json"):
        shape = json.loads(meta.read_text())["shape"]
        dumps[meta.stem] = np.fromfile(meta.with_suffix(".f32"), np.float32).reshape(shape)
    tokens, text = json.loads(run.stdout.splitlines()[-1])
    return dumps, [tuple(token) for token in tokens], text


def their_windows(model_path: Path, pcm: np.ndarray) -> int:
    """How many windows transcribe.cpp's encoder ran on ``pcm`` (its Whisper's profile, in a process of
    its own: the profile is asked for by the environment, read when the library loads)."""
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "pcm.npy", pcm)
        script = ("import sys, numpy, transcribe_cpp; from sayso.engine import reference; "
                  "transcribe_cpp.set_log_callback(lambda level, message: print(message)); "
                  "reference.transcribe(transcribe_cpp.Model(sys.argv[1]), numpy.load(sys.argv[2]))")
        run = subprocess.run([sys.executable, "-c", script, str(model_path), str(Path(folder) / "pcm.npy")],
                             env=dict(os.environ, TRANSCRIBE_PERF_DEBUG="1"), check=True, capture_output=True,
                             text=True)
    found = re.search(r"encs=(\d+)", run.stdout)
    if found is None:
        raise SaysoError("transcribe.cpp's profile gave no count of encoder windows.")
    return int(found.group(1))


def their_logits_after(model_path: Path, pcm: np.ndarray, prefix: str) -> np.ndarray | None:
    """transcribe.cpp's logits [n_vocab] (before any rule) for the token after ``prefix`` in ``pcm``,
    or None where it can't say (no prefix, or a model family that takes none)."""
    if not prefix:
        return None
    try:
        rows = _their_raw_logits(model_path, pcm, prefix)
    except subprocess.CalledProcessError:
        return None
    return None if rows is None or rows.ndim != 2 else rows[-1]


def their_first_logits(model_path: Path, pcm: np.ndarray) -> np.ndarray | None:
    """transcribe.cpp's logits [n_vocab] (before any rule) at the first decoder step on ``pcm``, before
    any text token: its dump keeps the first value of each tensor. None where the dump has no such row."""
    first = _their_raw_logits(model_path, pcm)
    return None if first is None or first.ndim != 1 else first


def _their_raw_logits(model_path: Path, pcm: np.ndarray, prefix: str | None = None) -> np.ndarray | None:
    """The ``dec.logits_raw`` transcribe.cpp dumps in a run on ``pcm`` (forced through ``prefix``), if any."""
    with tempfile.TemporaryDirectory() as folder:
        dumps, _, _ = transcribe_cpp_run(model_path, pcm, Path(folder), prefix)
    return dumps.get("dec.logits_raw")


def default_audio_dir() -> Path:
    """``$SAYSO_TEST_DATA/audio``, else ``tests/data/audio`` of the checkout this runs from (the tests'
    data: see ``tests/support/data.py``)."""
    data = os.environ.get("SAYSO_TEST_DATA")
    return Path(data) / "audio" if data else Path.cwd() / "tests" / "data" / "audio"


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
    minus theirs (infinite when the rules forbid every token that continues their text);
    ``their_margin``: their pick's logit minus ours in transcribe.cpp's logits after the same text
    (None where it can't be measured).
    """

    window: int
    step: int
    ours: str
    theirs: str
    top2: list[tuple[str, float]]
    margin: float
    their_margin: float | None = None

    @property
    def disagreement(self) -> float:
        """How many logits apart the engines are on the two tokens (a lead not had counts as 0)."""
        return self.margin + max(0.0, self.their_margin or 0.0)

    @property
    def near_tie(self) -> bool:
        return self.disagreement < NEAR_TIE_LOGITS


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
    windows: tuple[int, int] | None = None  # encoder windows, ours and transcribe.cpp's (Whisper)

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

    def encode(self, mel: np.ndarray, interrupt=None):
        self.windows.append([])
        return self.model.encode(mel, interrupt)

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

    This is the numpy oracle of ``WhisperOps.whisper_select`` run again on the engine's own logits, so a
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
    """One Whisper or Moonshine model loaded in our engine (on ``device``) and in transcribe.cpp,
    compared clip by clip.

    ``vad``: voice detection on, as the app has it: a piece without speech is skipped (transcribe.cpp
    still hears it); a piece with speech is heard whole either way. ``transform``: what is done to each
    clip's audio before both engines hear it (``telephone_band``).
    """

    def __init__(self, model: str, device: DeviceChoice = "cpu", vad: bool = False, transform=None):
        import transcribe_cpp  # the reference is needed here only, not by the app

        self.path = models.resolve(model)
        self.vad = vad
        self.transform = transform
        self.engine = Engine(self.path, device=device, vad=vad)
        transcriber = self.engine.transcriber
        self.recorder = None
        if isinstance(transcriber, WhisperTranscriber):
            self.recorder = WindowRecorder(transcriber.model)
            transcriber.model = self.recorder
        elif not isinstance(transcriber, MoonshineTranscriber):
            raise SaysoError(f"{model} is neither a Whisper nor a Moonshine model; engine.accuracy compares those.")
        self.tokenizer = transcriber.tokenizer
        self.reference = transcribe_cpp.Model(str(self.path))

    def describe(self) -> str:
        detected = ", voice detection on" if self.vad else ""
        heard = f", {self.transform.__name__.replace('_', ' ')}" if self.transform else ""
        return f"{self.engine.describe()}{detected}{heard} vs transcribe.cpp, {self.path.name}"

    def evaluate(self, audio_dir: Path, clip: Clip) -> ClipResult:
        pcm = load_audio(audio_dir / clip.file)
        if self.transform is not None:
            pcm = self.transform(pcm)
        # (start s, pcm): Whisper's windows follow its text, in both engines, over the whole clip; other
        # families' pieces are cut by the engine, and transcribe.cpp hears the same pieces
        window = self.engine.transcriber.window_seconds
        cut = [(0.0, pcm)] if self.recorder is not None else list(pieces([pcm], max_seconds=window))
        if self.recorder is not None:
            self.recorder.clear()
        ours = self.engine.transcribe(pcm)
        their_pieces = [reference.transcribe(self.reference, piece).text.strip() for _, piece in cut]
        theirs = " ".join(text for text in their_pieces if text)
        result = ClipResult(clip.file, clip.reference, ours.text, theirs,
                            count_errors(clip.reference, ours.text), count_errors(clip.reference, theirs))
        if self.recorder is not None:
            long = len(pcm) > window * SAMPLE_RATE
            result.windows = len(self.recorder.windows), their_windows(self.path, pcm) if long else 1
        if not result.equal:
            if self.recorder is not None:
                result.divergence = self.whisper_divergence(ours, cut, their_pieces)
            else:
                result.divergence = self.moonshine_divergence(ours, cut, their_pieces)
        return result

    def whisper_divergence(self, ours: Transcript, cut: list[tuple[float, np.ndarray]],
                           their_pieces: list[str]) -> Divergence | None:
        """Our logits where our sampled text first leaves transcribe.cpp's (None if it never does, or if
        the engine decoded no window at all), and transcribe.cpp's after the same text."""
        tokenizer = self.tokenizer
        if not self.recorder.windows:
            return None
        theirs = " ".join(text for text in their_pieces if text)
        rules = logit_rules(self.recorder.model.config, tokenizer, timestamps=True)
        tokens, allowed = zip(*(greedy_tokens(steps, rules) for steps in self.recorder.windows))
        kept = kept_tokens(tokenizer, list(tokens), ours)
        their_bytes = f" {theirs}".encode() if theirs else b""  # our segments open with a space token
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
        index, prefix = piece_prefix(their_pieces, at)
        # transcribe.cpp forces a prefix into its first window only
        after = their_logits_after(self.path, cut[index][1], prefix) if window == 0 else None
        return Divergence(
            window, step, tokenizer.token_text(ours_id), tokenizer.token_text(theirs_id),
            [(tokenizer.token_text(i), float(logits[i])) for i in (ours_id, runner_up)],
            float(logits[ours_id] - logits[theirs_id]),
            None if after is None else float(after[theirs_id] - after[ours_id]),
        )

    def continuations(self, rest: bytes) -> list[int]:
        """Token ids that could come next in a text whose remaining bytes are ``rest``: the text tokens
        that start it, or EOT and the timestamps when nothing remains."""
        tokenizer, config = self.tokenizer, self.recorder.model.config
        if not rest:
            return [config.eot, *range(tokenizer.timestamp_begin, config.n_vocab)]
        texts = ((t, tokenizer.token_bytes(t)) for t in range(tokenizer.timestamp_begin) if not tokenizer.is_special(t))
        return [t for t, text in texts if text and rest.startswith(text)]

    def moonshine_divergence(self, ours: Transcript, cut: list[tuple[float, np.ndarray]],
                             their_pieces: list[str]) -> Divergence | None:
        """The first piece whose texts differ, decoded again forced through our tokens up to the step
        where our text leaves transcribe.cpp's; our logits there, and transcribe.cpp's where that is the
        first step (its Moonshine takes no prefix to force it further)."""
        transcriber, tokenizer = self.engine.transcriber, self.tokenizer
        model = transcriber.model
        ends = [start for start, _ in cut[1:]] + [float("inf")]
        for index, ((start, piece), end, theirs) in enumerate(zip(cut, ends, their_pieces)):
            # a piece gives Moonshine one segment at most, starting inside the piece (later with voice detection)
            segment = next((s for s in ours.segments if start <= s.start < end), None)
            mine = segment.text if segment is not None else ""
            if mine == theirs:
                continue
            ids = [token.id for token in segment.tokens] if segment is not None else []
            step = next((k for k in range(1, len(ids) + 1) if not theirs.startswith(tokenizer.decode(ids[:k]).strip())),
                        len(ids) + 1) - 1
            state = model.decoder_session(model.encode(piece))
            logits = model.decode_step(state, model.config.decoder_start)
            for token in ids[:step]:
                logits = model.decode_step(state, token)
            logits = logits.astype(np.float64)
            ours_id = ids[step] if step < len(ids) else model.config.eos
            said = tokenizer.decode(ids[:step]).strip()
            if said == theirs:
                candidates = [model.config.eos]
            else:
                candidates = [t for t in range(len(logits)) if not tokenizer.is_special(t)
                              and len(grown := tokenizer.decode([*ids[:step], t]).strip()) > len(said)
                              and theirs.startswith(grown)]
            if not candidates:
                return Divergence(index, step, tokenizer.decode([ours_id]), "", [], float("inf"))
            theirs_id = max(candidates, key=lambda t: logits[t])
            runner_up = int(np.argsort(-logits, kind="stable")[1])
            after = their_first_logits(self.path, piece) if step == 0 else None
            return Divergence(index, step, tokenizer.token_bytes(ours_id).decode(errors="replace"),
                              tokenizer.token_bytes(theirs_id).decode(errors="replace"),
                              [(tokenizer.token_bytes(i).decode(errors="replace"), float(logits[i]))
                               for i in (ours_id, runner_up)],
                              float(logits[ours_id] - logits[theirs_id]),
                              None if after is None else float(after[theirs_id] - after[ours_id]))
        return None


def piece_prefix(their_pieces: list[str], at: int) -> tuple[int, str]:
    """Which piece the byte ``at`` of ``" " + " ".join(texts)`` falls in, and that piece's text before it."""
    start = 0
    nonempty = [(index, text) for index, text in enumerate(their_pieces) if text]
    for index, text in nonempty:
        end = start + 1 + len(text.encode())
        if at <= end or (index, text) == nonempty[-1]:
            return index, f" {text}".encode()[: max(0, at - start)].decode(errors="ignore").strip()
        start = end
    return 0, ""


def summary(results: list[ClipResult]) -> dict:
    """Clip counts and pooled word error rates: over all clips, and over the clips whose texts are
    equal or part other than at a near-tie (``decided_errors_*``), where a difference in errors is the
    engines' and not rounding's."""
    differ = [r for r in results if not r.equal]
    ours = sum((r.ours_errors for r in results), ErrorCount())
    theirs = sum((r.theirs_errors for r in results), ErrorCount())
    decided = [r for r in results if r.equal or r.divergence is None or not r.divergence.near_tie]
    return {
        "clips": len(results),
        "equal": len(results) - len(differ),
        "near_ties": sum(1 for r in differ if r.divergence is not None and r.divergence.near_tie),
        "not_near_ties": sum(1 for r in differ if r.divergence is None or not r.divergence.near_tie),
        "near_tie_logits": NEAR_TIE_LOGITS,
        "wer_ours": ours.rate, "errors_ours": ours.errors,
        "wer_theirs": theirs.rate, "errors_theirs": theirs.errors,
        "reference_words": ours.words,
        "decided_errors_ours": sum(r.ours_errors.errors for r in decided),
        "decided_errors_theirs": sum(r.theirs_errors.errors for r in decided),
    }


def clip_lines(r: ClipResult) -> list[str]:
    """One clip's part of the report: both texts, the first difference and its verdict, word errors."""
    lines = [f"{r.file}: {'equal' if r.equal else 'DIFFERENT'}", f"  ours:   {r.ours}", f"  theirs: {r.theirs}"]
    d = r.divergence
    if d is not None:
        top2 = ", ".join(f"{text!r} {logit:.3f}" for text, logit in d.top2)
        verdict = f"near-tie (< {NEAR_TIE_LOGITS})" if d.near_tie else f"NOT a near-tie (>= {NEAR_TIE_LOGITS})"
        their_side = "not measured" if d.their_margin is None else f"{d.their_margin:.3f}"
        lines.append(f"  first difference: window {d.window} step {d.step}: ours {d.ours!r}, theirs {d.theirs!r}; "
                     f"our top-2 {top2}; our lead {d.margin:.3f}, theirs {their_side}: {verdict}")
    elif not r.equal:
        lines.append("  no sampled token differs: the texts differ in spacing, or no window was decoded")
    lines.append(f"  word errors: ours {r.ours_errors.errors}, theirs {r.theirs_errors.errors} "
                 f"of {r.ours_errors.words} words")
    if r.windows is not None:
        lines.append(f"  encoder windows: ours {r.windows[0]}, theirs {r.windows[1]}")
    return lines


def summary_lines(results: list[ClipResult]) -> list[str]:
    s = summary(results)
    return [f"{s['equal']}/{s['clips']} clips equal; {s['near_ties']} differences at a near-tie, "
            f"{s['not_near_ties']} other differences",
            f"WER over {s['reference_words']} reference words: ours {s['wer_ours']:.2%} ({s['errors_ours']} errors), "
            f"transcribe.cpp {s['wer_theirs']:.2%} ({s['errors_theirs']} errors); outside near-ties: "
            f"ours {s['decided_errors_ours']} errors, transcribe.cpp {s['decided_errors_theirs']}"]


def as_json(r: ClipResult) -> dict:
    """A clip's result for ``--json``; an infinite margin (no allowed continuation) becomes null."""
    out = {**asdict(r), "equal": r.equal, "near_tie": r.divergence.near_tie if r.divergence else None}
    if r.divergence is not None and not np.isfinite(r.divergence.margin):
        out["divergence"]["margin"] = None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.accuracy", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model name (whisper-tiny.en, whisper-base, moonshine-tiny, ...) or .gguf path")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    parser.add_argument("--vad", action="store_true", help="voice detection on, as in the app: our pieces "
                        "without speech are skipped (transcribe.cpp still hears them)")
    parser.add_argument("--telephone", action="store_true", help="both engines hear each clip's telephone-band "
                        "version (8 kHz, 300-3400 Hz, back to 16 kHz)")
    parser.add_argument("--audio", type=Path, default=None, help="folder holding transcripts.tsv "
                        "(default: $SAYSO_TEST_DATA/audio, else tests/data/audio)")
    args = parser.parse_args()
    audio_dir = args.audio or default_audio_dir()
    evaluator = Evaluator(args.model, args.device, vad=args.vad, transform=telephone_band if args.telephone else None)
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
