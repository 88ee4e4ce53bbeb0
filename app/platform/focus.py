"""Which window, and which app, has the keyboard focus: the target of a dictation and its per-app profile.

X11 tells any client the focused window (xdotool) and its class (xprop's WM_CLASS). Wayland tells no
client which window is focused; where the compositor has its own IPC saying it (sway's, and i3's
protocol that sway speaks), the focused app's id is read from there, otherwise the app is unknown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from sayso.app.platform.hotkeys import display_server


def _run(args: list[str], timeout: float = 2.0) -> str | None:
    """A quick query (xdotool get*, xprop, swaymsg): its stdout, or None when it fails or the tool is missing."""
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def focused_window() -> str | None:
    """The X window that has the keyboard focus (xdotool's decimal id), or None (Wayland, no X, no focus).

    getactivewindow needs a window manager (EWMH); getwindowfocus works without one (bare X, Xvfb).
    """
    if display_server() != "x11" or not shutil.which("xdotool"):
        return None
    return _run(["xdotool", "getactivewindow"]) or _run(["xdotool", "getwindowfocus"]) or None


def window_class(window: str) -> str:
    """The window's WM_CLASS class name, lowercased ("" when unknown)."""
    out = _run(["xprop", "-id", window, "WM_CLASS"]) or ""
    names = [part.strip().strip('"').lower() for part in out.partition("=")[2].split(",")]
    return names[-1] if names and names[-1] else ""


def focused_app(window: str | None) -> str:
    """The focused app's name as a profile matches it, lowercased: the class of ``window`` (the X window
    focused at key-down) on X11, the focused app id (or X11 class, for an Xwayland window) from sway's
    IPC on Wayland; "" where no one says."""
    if window is not None:
        return window_class(window)
    if display_server() != "wayland" or not (os.environ.get("SWAYSOCK") and shutil.which("swaymsg")):
        return ""
    tree = _run(["swaymsg", "-t", "get_tree", "-r"])
    try:
        focused = _focused_node(json.loads(tree)) if tree else None
    except ValueError:
        return ""
    if focused is None:
        return ""
    name = focused.get("app_id") or (focused.get("window_properties") or {}).get("class") or ""
    return str(name).lower()


def _focused_node(node: dict) -> dict | None:
    if node.get("focused") and node.get("type") in ("con", "floating_con"):
        return node
    for child in node.get("nodes", []) + node.get("floating_nodes", []):
        found = _focused_node(child)
        if found is not None:
            return found
    return None
