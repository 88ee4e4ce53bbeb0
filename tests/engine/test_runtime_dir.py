"""Commands run where the session has no runtime folder (a console, a service, ssh) print nothing about
it: wgpu's OpenGL probe said "error: XDG_RUNTIME_DIR is invalid" twice on every `sayso doctor`; the
engine points the variable at a private folder of the user's first."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from support.cli import cli_env
from support.data import ROOT


def test_no_runtime_folder_no_error_on_stderr(tmp_path):
    env = {k: v for k, v in cli_env(tmp_path / "data").items() if k != "XDG_RUNTIME_DIR"}
    probe = ("import os, sayso.engine.gpu.device as d, wgpu; wgpu.gpu.enumerate_adapters_sync(); "
             "print(os.environ['XDG_RUNTIME_DIR'])")
    run = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "XDG_RUNTIME_DIR" not in run.stderr
    folder = os.stat(run.stdout.strip())
    assert stat.S_ISDIR(folder.st_mode) and folder.st_uid == os.getuid() and not folder.st_mode & 0o077
