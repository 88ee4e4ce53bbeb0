"""Which window, and which app, has the keyboard focus: the target of a dictation and its per-app profile.

X11 tells any client the focused window (xdotool) and its class (xprop's WM_CLASS). Wayland tells no
client which window is focused; where the compositor has its own IPC saying it (sway's, and i3's
protocol that sway speaks), the focused window (``sway:`` and its node id) and its app id are read from
there, otherwise both are unknown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from sayso.app.platform.hotkeys import display_server

SWAY_WINDOW = "sway:"  # a sway window's name in ``focused_window``, before its node id


def _run(args: list[str], timeout: float = 2.0) -> str | None:
    """A quick query (xdotool get*, xprop, swaymsg): its stdout, or None when it fails or the tool is missing."""
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def focused_window() -> str | None:
    """The window that has the keyboard focus, or None (no X and no sway, no focus): on X11 xdotool's
    decimal id, on sway ``sway:`` and the window's node id.

    getactivewindow needs a window manager (EWMH); getwindowfocus works without one (bare X, Xvfb).
    """
    server = display_server()
    if server == "wayland":
        focused = _sway_focused()
        return None if focused is None else f"{SWAY_WINDOW}{focused['id']}"
    if server != "x11" or not shutil.which("xdotool"):
        return None
    return _run(["xdotool", "getactivewindow"]) or _run(["xdotool", "getwindowfocus"]) or None


def window_class(window: str) -> str:
    """The X window's WM_CLASS class name, lowercased ("" when unknown)."""
    out = _run(["xprop", "-id", window, "WM_CLASS"]) or ""
    names = [part.strip().strip('"').lower() for part in out.partition("=")[2].split(",")]
    return names[-1] if names and names[-1] else ""


def focused_app(window: str | None) -> str:
    """The app of ``window`` (``focused_window``'s at key-down) as a profile matches it, lowercased: its
    class on X11; on sway the app id (or X11 class, for an Xwayland window) of the focused window, read
    again from sway's IPC; "" where no one says."""
    if window is None:
        return ""
    if not window.startswith(SWAY_WINDOW):
        return window_class(window)
    focused = _sway_focused()
    if focused is None:
        return ""
    name = focused.get("app_id") or (focused.get("window_properties") or {}).get("class") or ""
    return str(name).lower()


def _sway_focused() -> dict | None:
    """sway's node of the focused window, from its IPC as the user's session gives it (SWAYSOCK)."""
    if not (os.environ.get("SWAYSOCK") and shutil.which("swaymsg")):
        return None
    tree = _run(["swaymsg", "-t", "get_tree", "-r"])
    try:
        return _focused_node(json.loads(tree)) if tree else None
    except ValueError:
        return None


def _focused_node(node: dict) -> dict | None:
    if node.get("focused") and node.get("type") in ("con", "floating_con"):
        return node
    for child in node.get("nodes", []) + node.get("floating_nodes", []):
        found = _focused_node(child)
        if found is not None:
            return found
    return None
