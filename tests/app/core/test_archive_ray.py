"""`sayso transcribe DIR -o OUTDIR --ray local`: a Ray worker that dies mid-file costs no file
(``app.core.archive_ray``: Ray restarts the worker and runs again the files it held), and a worker whose
engine batches its encoder is sent several files a task."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_archive import archive, finish, outputs, records, transcribe

from support.data import AUDIO, TINY_EN_GGUF, skip_or_fail
from support.texts import JFK_WORDS, words

WORKER_AT_WORK = b"ray::ArchiveWorker.transcribe"
"""How a Ray worker process titles itself while it runs ``ArchiveWorker.transcribe``."""


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])  # the name may hold spaces and parentheses


def _descends_from(pid: int, ancestor: int) -> bool:
    try:
        while pid > 1:
            pid = _parent(pid)
            if pid == ancestor:
                return True
    except (OSError, ValueError):  # a process that ended meanwhile
        pass
    return False


def _worker_at_work(*ancestors: int) -> int | None:
    """A Ray worker process below one of ``ancestors`` (the command that started a Ray instance, or a
    cluster's raylets) that is transcribing a file, if there is one."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                title = cmdline.read()
        except OSError:
            continue
        if title.startswith(WORKER_AT_WORK) and any(_descends_from(int(name), a) for a in ancestors):
            return int(name)
    return None


def _clips(folder: Path, count: int) -> list[Path]:
    folder.mkdir()
    clips = [folder / f"take{i}.wav" for i in range(count)]
    for clip in clips:
        shutil.copy(AUDIO / "jfk.wav", clip)
    return clips


def _assert_each_clip_done_once(out: Path, clips: list[Path], status: int, stderr: str) -> None:
    assert status == 0, stderr
    assert f"sayso: {len(clips)} transcribed, 0 skipped (done before), 0 failed" in stderr
    done = Counter(r["input"]["path"] for r in records(out) if r["status"] == "done")
    assert done == {str(clip.resolve()): 1 for clip in clips}, "a file transcribed twice, or never"
    texts = outputs(out)
    assert sorted(texts) == sorted(f"{clip.name}.txt" for clip in clips)
    assert all(words(text) == JFK_WORDS for text in texts.values())


def test_a_ray_worker_killed_mid_file_is_restarted_and_no_file_is_lost(tmp_path):
    """Two CPU workers, six copies of a clip; the first worker seen at work is SIGKILLed (as when its
    process or its node dies): every file is still transcribed, exactly once, and the run succeeds."""
    if importlib.util.find_spec("ray") is None:
        skip_or_fail("needs Ray: pip install -e '.[cluster]'")
    folder, out = tmp_path / "archive", tmp_path / "out"
    clips = _clips(folder, 6)

    run = transcribe(folder, out, tmp_path / "data", "--ray", "local", "--ray-workers", "2")
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and run.poll() is None and time.monotonic() < deadline:
        if (killed := _worker_at_work(run.pid)) is not None:
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    status, stderr = finish(run)
    assert killed is not None, f"no worker was seen at work\n{stderr}"
    assert not Path(f"/proc/{killed}").exists()
    _assert_each_clip_done_once(out, clips, status, stderr)


@pytest.mark.slow  # four raylets started and one taken out
def test_the_files_of_a_node_that_dies_are_done_on_another_node_of_the_cluster(tmp_path):
    """``--ray ADDRESS``: a cluster of a head and three worker nodes (Ray's own multi-node harness, each node
    its own raylet), two engines spread over them; the node of an engine at work is taken out, as a machine
    that fails: Ray restarts the engine on the spare node and its files are done there, each once."""
    if importlib.util.find_spec("ray") is None:
        skip_or_fail("needs Ray: pip install -e '.[cluster]'")
    from ray.cluster_utils import Cluster

    folder, out = tmp_path / "archive", tmp_path / "out"
    clips = _clips(folder, 6)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the engines go to the workers
    try:
        raylets = {}
        for _ in range(3):
            node = cluster.add_node(num_cpus=1)
            raylets[node.all_processes["raylet"][0].process.pid] = node
        run = transcribe(folder, out, tmp_path / "data", "--ray", cluster.address, "--ray-workers", "2")
        lost = None
        deadline = time.monotonic() + 120
        while lost is None and run.poll() is None and time.monotonic() < deadline:
            worker = _worker_at_work(*raylets)
            if worker is not None:
                lost = next(pid for pid in raylets if _descends_from(worker, pid))
                cluster.remove_node(raylets[lost], allow_graceful=False)
            time.sleep(0.05)
        status, stderr = finish(run)
    finally:
        cluster.shutdown()
    assert lost is not None, f"no worker was seen at work\n{stderr}"
    _assert_each_clip_done_once(out, clips, status, stderr)


class _Counting:
    """A Ray worker's handle that notes the paths of each task it is sent."""

    def __init__(self, worker, tasks: list[list[str]]) -> None:
        self.ready = worker.ready
        self.transcribe = SimpleNamespace(remote=lambda paths: tasks.append(paths) or worker.transcribe.remote(paths))


def test_a_worker_whose_engine_batches_is_sent_several_files_a_task_and_writes_what_a_local_run_writes(
        tmp_path, monkeypatch, capsys):
    """``--batch 3`` with ``--ray``: the worker's encoder takes three windows a pass (as a GPU's does by
    default), so each task carries three files, bad ones among them, transcribed together by the engine's
    ``transcribe_many``; the outputs and the manifest's records are a local run's, file by file."""
    if importlib.util.find_spec("ray") is None:
        skip_or_fail("needs Ray: pip install -e '.[cluster]'")
    from sayso.app import cli
    from sayso.app.core import archive_ray

    folder, local, on_ray, data = tmp_path / "archive", tmp_path / "local", tmp_path / "ray", tmp_path / "data"
    good = archive(folder)
    status, _ = finish(transcribe(folder, local, data))
    assert status == 1  # because of the bad files

    tasks = []
    start_workers = archive_ray._start_workers
    monkeypatch.setattr(archive_ray, "_start_workers",
                        lambda *args: [_Counting(worker, tasks) for worker in start_workers(*args)])
    monkeypatch.setenv("SAYSO_DATA_DIR", str(data))
    status = cli.main(["transcribe", str(folder), "-o", str(on_ray), "--recursive", "--model", str(TINY_EN_GGUF),
                       "--device", "cpu", "--ray", "local", "--ray-workers", "1", "--batch", "3"])
    stderr = capsys.readouterr().err
    assert status == 1, stderr
    assert "sayso: 3 transcribed, 0 skipped (done before), 2 failed" in stderr
    assert [len(task) for task in tasks] == [3, 2], tasks  # five inputs (the link is jfk.wav), one worker
    assert outputs(on_ray) == outputs(local) and set(outputs(on_ray)) == set(good)
    assert {r["input"]["path"]: r for r in records(on_ray)} == {r["input"]["path"]: r for r in records(local)}
