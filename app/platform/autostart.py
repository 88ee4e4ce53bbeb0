"""Starting Sayso at login: an XDG autostart entry (``$XDG_CONFIG_HOME/autostart/<DESKTOP_ID>.desktop``,
named as the app's desktop entry, which lets a desktop match the two).

Desktops that follow the XDG Autostart specification (GNOME, KDE, Xfce, and sway or Hyprland with a
launcher of such entries) run it when the user logs in; Sayso then starts in the tray (``--hidden``).
The entry runs the ``sayso`` found on PATH, else this Python with ``-m sayso`` (the package's name, which
resolves from any folder), so a virtual environment that isn't on PATH still starts.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from sayso.app.platform.locations import DESKTOP_ID
from sayso.engine import write_text_atomically

# The entry's name before it was the desktop id: still read as "on", and replaced when the setting changes.
EARLIER_NAME = "sayso.desktop"


def autostart_folder() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME")
    return (Path(config).expanduser() if config else Path.home() / ".config") / "autostart"


def autostart_file() -> Path:
    return autostart_folder() / f"{DESKTOP_ID}.desktop"


def launch_command() -> str:
    found = shutil.which("sayso")
    return shlex.quote(found) if found else f"{shlex.quote(sys.executable)} -m sayso"


def set_start_at_login(on: bool) -> None:
    """Write or remove the autostart entry; OSError when the folder can't be written."""
    path = autostart_file()
    (autostart_folder() / EARLIER_NAME).unlink(missing_ok=True)
    if not on:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Sayso",
        "Comment=Dictation: hold a key, speak, let go",
        f"Exec={launch_command()} --hidden",
        "Icon=sayso",
        "Terminal=false",
        "X-GNOME-Autostart-enabled=true",
        "",
    ]))


def starts_at_login() -> bool:
    return autostart_file().is_file() or (autostart_folder() / EARLIER_NAME).is_file()
