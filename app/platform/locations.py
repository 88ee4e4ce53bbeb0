"""Where the app keeps what it writes, by the XDG Base Directory conventions.

- data (models, history, recordings): ``$XDG_DATA_HOME/sayso`` (``engine.models.data_dir``);
- settings: ``$XDG_CONFIG_HOME/sayso/settings.json``;
- the log, rotated: ``$XDG_STATE_HOME/sayso/sayso.log``;
- the single-instance socket: ``$XDG_RUNTIME_DIR`` (private to the user, gone at logout).

A data folder other than the default one (``SAYSO_DATA_DIR``: a portable install, a test) keeps
everything, settings and log included, so that two of them never share a file. Settings written by
earlier versions into the default data folder move to the config folder on first start.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

# The desktop entry's name (packaging/<it>.desktop), which is also the AppStream id and the Wayland app id:
# launchers, notifications and the autostart entry are matched with the app by it.
DESKTOP_ID = "io.github.sayso.Sayso"
LOG_BYTES = 1_000_000  # one log file's size before it is rotated
LOG_FILES = 3  # rotated logs kept besides the current one


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return (Path(value).expanduser() if value and Path(value).is_absolute() else Path.home() / fallback) / "sayso"


def _default_data(data_dir: Path) -> bool:
    from sayso.engine import data_dir as default

    return not os.environ.get("SAYSO_DATA_DIR") and Path(data_dir).resolve() == default().expanduser().resolve()


def settings_file(data_dir: Path) -> Path:
    """The settings of the app whose data folder is ``data_dir`` (module docstring)."""
    if not _default_data(data_dir):
        return Path(data_dir) / "settings.json"
    path = _xdg("XDG_CONFIG_HOME", ".config") / "settings.json"
    earlier = Path(data_dir) / "settings.json"
    if earlier.is_file() and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        earlier.replace(path)
        log.info("settings: moved to %s", path)
    return path


def log_file(data_dir: Path) -> Path:
    if not _default_data(data_dir):
        return Path(data_dir) / "sayso.log"
    return _xdg("XDG_STATE_HOME", ".local/state") / "sayso.log"


def runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR`` when it is a folder; None where the session has none (the socket then goes
    where Qt puts it, the temporary folder)."""
    value = os.environ.get("XDG_RUNTIME_DIR")
    return Path(value) if value and Path(value).is_dir() else None
