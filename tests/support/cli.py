"""The environment a ``sayso`` command runs in under test."""

from __future__ import annotations

import os


def cli_env(data_dir, **env: str) -> dict[str, str]:
    """The environment a ``sayso`` command runs in under test: its own data folder, no desktop session."""
    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    environment.update(SAYSO_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen", **env)
    return environment
