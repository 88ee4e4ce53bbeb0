"""``sayso transcribe DIR... -o OUTDIR --ray ADDRESS``: the archive's files transcribed by engines on a Ray
cluster (the optional extra ``sayso[cluster]``), its outputs and manifest written here as a local run
writes them (``archive.ArchiveRun``), so that a rerun, local or on Ray, skips what either did.

What runs where: this process (the driver) finds the files, reads the manifest, sends the files' *paths* to
the workers, a few files a task, and writes what comes back: the outputs and the manifest, one writer. Each
worker (a Ray actor) loads the model once and transcribes the files of each task it is given together, so
that an engine that batches its encoder (a GPU's) encodes the windows of several files in one pass. Paths,
not bytes, travel: an input can be a long video, so on a cluster of several machines the inputs and the
model file must be at the same paths on every node (a shared mount), as ``docs/CLUSTER.md`` says.

No printing: the command line shows the ``Progress`` and the failures, as for a local run.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from sayso.app.core.archive import ArchiveFile, ArchiveRun, Progress, Summary
from sayso.engine import AudioError, SaysoError

log = logging.getLogger(__name__)

LOCAL = "local"
"""``--ray local``: a Ray instance of this machine's own, started and stopped by the command."""
IN_FLIGHT_PER_WORKER = 2
"""Tasks sent to a worker ahead of its results: one to work on and one waiting, so that a worker never
idles for a round trip, while the rest of the files stay here (a huge archive is not queued on the cluster
at once, and files go to the workers that finish first). A task carries as many files as the worker asks
for (``ArchiveWorker.ready``)."""
RESTARTS = 2
"""How often Ray restarts a worker that died (its process or its node), on another node when its own is
gone (where the cluster has room for it: else it waits for room). A worker dead after that is dropped and
the run goes on with the others."""
REST_SECONDS = 1.0
"""How often a worker that Ray is restarting is asked whether it is back."""
ATTEMPTS = 3
"""Workers a file is sent to before it is recorded as failed (a rerun tries it again): each file of a task
whose worker was lost goes back to the queue, since Ray can't tell whether a lost task ran, and a
transcription run twice writes nothing twice (the driver writes the outputs). A file that kills every
worker it reaches stops there."""
LOCAL_OBJECT_STORE_BYTES = 100 * 2**20
"""``--ray local``'s object store: only transcripts travel through it, so Ray's default (30% of the
machine's memory) would reserve memory for nothing."""


class ArchiveWorker:
    """A Ray actor: one engine, the model loaded once, transcribing the files of a task together, ``batch``
    windows in each encoder pass (``Engine.encoder_batch``: 1 unless asked)."""

    def __init__(self, model: str, device: str, options: dict, batch: int | None) -> None:
        import ray

        from sayso.engine import Engine

        gpus = ray.get_gpu_ids()
        if gpus:  # Ray's GPU numbers taken as the Vulkan adapters': the workers of a node on GPUs of their own
            from sayso.engine import ADAPTER_ENV

            os.environ.setdefault(ADAPTER_ENV, str(int(gpus[0])))
        self.engine = Engine(model, device=device)
        self.options = options
        self.batch = self.engine.encoder_batch(batch)

    def ready(self) -> int:
        """The files a task for this worker carries: as many as windows in its encoder's pass, so that short
        files fill it too. Asked once the worker is started, and again once Ray restarted it, before files
        go to it."""
        return self.batch

    def transcribe(self, paths: list[str]) -> list:
        """Each file's transcript, or its ``AudioError``'s message (a bad file, recorded as failed), in the
        order of ``paths``; any other error reaches the driver and stops the run, as it would locally."""
        outcomes = self.engine.transcribe_many(paths, language=self.options["language"], task=self.options["task"],
                                               prompt=self.options["prompt"], batch=self.batch)
        return [str(outcome) if isinstance(outcome, AudioError) else outcome for _, outcome in outcomes]


def transcribe_archive_on_ray(files: list[ArchiveFile], outdir: Path, model: Path, options: dict, address: str,
                              workers: int | None, device: str, batch: int | None,
                              show: Callable[[Progress, float], None],
                              failed: Callable[[Path, str], None]) -> Summary:
    """``archive.transcribe_archive`` on Ray at ``address`` (``local``, ``auto``, or ``HOST:PORT``) with
    ``workers`` engines: by default one per GPU of the cluster, or, with no GPU or ``device`` ``cpu``, one
    per node (the numpy backend uses all of a machine's cores). ``batch``: windows per encoder pass, and
    files per task (default: 1)."""
    run = ArchiveRun(files, outdir, model, options)
    if not run.todo:  # nothing to do: no cluster to reach
        return run.finish()
    ray = _import_ray()
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}  # the command line shows what matters
    with warnings.catch_warnings():  # Ray's tips about its future versions are not the user's business
        warnings.simplefilter("ignore", FutureWarning)
        if address == LOCAL:
            ray.init(num_cpus=workers or 1, object_store_memory=LOCAL_OBJECT_STORE_BYTES, include_dashboard=False,
                     **quiet)
        else:
            ray.init(address=address, **quiet)
    try:
        _transcribe_on(ray, run, _start_workers(ray, str(model), device, options, workers, batch), show, failed)
    finally:
        ray.shutdown()  # a local instance stops; a cluster's workers end with this driver
    return run.finish()


def _import_ray():
    try:
        import ray
    except ImportError:
        raise SaysoError("--ray needs Ray: install sayso[cluster] (pip install 'sayso[cluster]').") from None
    return ray


def _start_workers(ray, model: str, device: str, options: dict, workers: int | None, batch: int | None) -> list:
    """The workers: one GPU each where the cluster has GPUs and ``device`` isn't ``cpu``, else one CPU
    each, spread over the nodes."""
    gpus = int(ray.cluster_resources().get("GPU", 0)) if device != "cpu" else 0
    if gpus:
        actor = ray.remote(num_gpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS)(ArchiveWorker)
    else:
        actor = ray.remote(num_cpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS,
                           scheduling_strategy="SPREAD")(ArchiveWorker)
    count = workers or gpus or sum(1 for node in ray.nodes() if node["Alive"])
    return [actor.remote(model, device, options, batch) for _ in range(count)]


def _transcribe_on(ray, run: ArchiveRun, started: list, show, failed) -> None:
    """Send the files to do to the ``started`` workers, each once it answers ``ready`` with the files its
    tasks carry, at most ``IN_FLIGHT_PER_WORKER`` tasks each, recording each file's outcome as its task comes
    back, in whatever order.

    A worker whose process or node died answers ``ActorUnavailableError`` while Ray restarts it (Ray can't
    tell whether its task was done): the task's files go back to the queue for the other workers
    (``ATTEMPTS``), and it rests, asked ``ready`` every ``REST_SECONDS``, until it answers again. A worker
    that Ray gave up on (``ActorDiedError``) is dropped."""
    from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

    queue = deque(run.todo)
    pending = {}  # a result to come -> (its task's files, or None for a ``ready`` probe; the worker asked)
    attempts = Counter()
    workers = {}  # a worker that answers -> the files a task for it carries
    resting = {}  # a worker being restarted -> when to ask it whether it is back

    def fill(worker) -> None:
        while queue and sum(w is worker for _, w in pending.values()) < IN_FLIGHT_PER_WORKER:
            task = [queue.popleft() for _ in range(min(workers[worker], len(queue)))]
            attempts.update(file.path for file in task)
            pending[worker.transcribe.remote([str(file.path) for file in task])] = (task, worker)

    for worker in started:
        pending[worker.ready.remote()] = (None, worker)
    show(run.progress, 0.0)
    while any(task is not None for task, _ in pending.values()) or (queue and (pending or resting)):
        if pending:
            ready = ray.wait(list(pending), num_returns=1, timeout=REST_SECONDS)[0]
        else:  # every worker left is being restarted
            time.sleep(REST_SECONDS)
            ready = []
        now = time.monotonic()
        for worker in [w for w, at in resting.items() if at <= now]:
            del resting[worker]
            pending[worker.ready.remote()] = (None, worker)
        if not ready:
            continue
        task, worker = pending.pop(ready[0])
        try:
            answer = ray.get(ready[0])
        except RayTaskError as error:  # not a bad file: e.g. options the model refuses
            raise error.cause from None
        except RayActorError as error:
            workers.pop(worker, None)
            probed = any(t is None and w is worker for t, w in pending.values())
            if isinstance(error, ActorUnavailableError) and not probed:
                resting[worker] = now + REST_SECONDS
                log.info("archive: a Ray worker is being restarted (%s)", str(error).splitlines()[0])
            answer = None
            if task is not None:  # each file goes to a worker again (None), or fails after ATTEMPTS
                again = [file for file in task if attempts[file.path] < ATTEMPTS]
                queue.extendleft(reversed(again))
                why = f"its Ray worker died {ATTEMPTS} times: {str(error).splitlines()[0]}"
                answer = [None if file in again else why for file in task]
        if task is None:
            if answer is not None:  # a worker started, or back after a restart
                workers[worker] = answer
        else:
            for file, outcome in zip(task, answer):
                if isinstance(outcome, str):
                    run.record_failed(file, outcome)
                    failed(file.path, outcome)
                elif outcome is not None:
                    run.record_done(file, outcome)
        for spare in workers:  # a file handed back goes to whoever has room
            fill(spare)
        show(run.progress, 0.0)
    if queue:
        raise SaysoError(f"Every Ray worker died, {len(queue)} files not sent: rerun to do them.")
