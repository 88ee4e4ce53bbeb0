"""Xvfb, sway, a PulseAudio null sink, a session bus and a notification daemon for the end-to-end
tests: reused when running, started otherwise.

A missing tool fails the test with the apt-get line that installs it: the end-to-end tests are the
only proof that dictation reaches another app, so they never skip.

PulseAudio setup (see shared/notes/platform.md): a daemon with a 16 kHz mono null sink ``vsink`` as the
default sink and its monitor as the default source, so whatever ``paplay --device=vsink`` plays is what
the app's microphone hears; a silent low-latency ``pacat`` keeps the monitor flowing in real time.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

APT_PACKAGES = {
    "Xvfb": "xvfb",
    "xdotool": "xdotool",
    "xprop": "x11-utils",
    "xterm": "xterm",
    "pulseaudio": "pulseaudio",
    "pactl": "pulseaudio-utils",
    "paplay": "pulseaudio-utils",
    "pacat": "pulseaudio-utils",
    "trayer": "trayer",
    "xwininfo": "x11-utils",
    "dbus-daemon": "dbus-daemon",
    "dunst": "dunst",
    "sway": "sway",
    "swaymsg": "sway",
    "grim": "grim",
    "wl-copy": "wl-clipboard",
    "wl-paste": "wl-clipboard",
    "wtype": "wtype",
    "foot": "foot",
}
SINK = "vsink"


def require(*tools: str) -> None:
    """Fail (not skip) when a command-line tool is missing, naming the Debian packages to install."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        packages = " ".join(sorted({APT_PACKAGES.get(t, t) for t in missing}))
        pytest.fail(
            f"missing {', '.join(missing)}: apt-get install -y {packages} libxcb-icccm4 libxcb-keysyms1 libportaudio2"
        )


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class XServer:
    display: str
    process: subprocess.Popen | None = None  # None when an X server was already running

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _x_alive(display: str) -> bool:
    env = {**os.environ, "DISPLAY": display}
    return subprocess.run(["xdotool", "getdisplaygeometry"], env=env, capture_output=True).returncode == 0


def start_xvfb() -> XServer:
    """The X display in $DISPLAY if one answers, else a new Xvfb on a display number it claims itself
    (``-displayfd``): two test runs starting at once must not both pick the first free number and
    share one server, where each run's keystrokes reach the other's windows."""
    require("Xvfb", "xdotool")
    current = os.environ.get("DISPLAY")
    if current and _x_alive(current):
        return XServer(current)
    chosen, told = os.pipe()
    process = subprocess.Popen(
        ["Xvfb", "-displayfd", str(told), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(told,),
    )
    os.close(told)
    try:
        with os.fdopen(chosen) as number:
            _wait(lambda: select.select([number], [], [], 0)[0], 15, "Xvfb to choose a display")
            display = f":{number.readline().strip()}"
        _wait(lambda: _x_alive(display), 15, f"Xvfb on {display}")
    except (RuntimeError, ValueError):
        process.kill()
        raise
    return XServer(display, process)


@dataclass
class SystemTray:
    """trayer's panel, docked at the top right of an X display: a system tray (XEmbed) for the apps on it."""

    display: str
    process: subprocess.Popen

    def icons(self) -> list[tuple[int, int]]:
        """The screen centres of the icons embedded in the panel, left to right."""
        tree = subprocess.run(["xwininfo", "-root", "-tree"], env={**os.environ, "DISPLAY": self.display},
                              capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
        panel = next((i for i, line in enumerate(tree) if '("panel" "trayer")' in line), None)
        if panel is None:
            return []
        depth = len(tree[panel]) - len(tree[panel].lstrip())
        centres = []
        for line in tree[panel + 1 :]:
            if line.strip() and len(line) - len(line.lstrip()) <= depth:
                break  # past the panel's descendants
            # an embedded client: a named window, "WxH+x+y  +absx+absy"
            found = re.search(r'^\s+0x[0-9a-f]+ "[^"]*": \(.*\)\s+(\d+)x(\d+)\+-?\d+\+-?\d+\s+\+(-?\d+)\+(-?\d+)', line)
            if found:
                w, h, x, y = map(int, found.groups())
                centres.append((x + w // 2, y + h // 2))
        return sorted(centres)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_tray(display: str) -> SystemTray:
    """trayer on ``display``; returns once its panel is mapped."""
    require("trayer", "xwininfo")
    process = subprocess.Popen(
        ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24",
         "--transparent", "false", "--expand", "true"],
        env={**os.environ, "DISPLAY": display}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    tray = SystemTray(display, process)

    def panel_mapped() -> bool:
        tree = subprocess.run(["xwininfo", "-root", "-tree"], env={**os.environ, "DISPLAY": display},
                              capture_output=True, text=True).stdout  # fmt: skip
        return '("panel" "trayer")' in tree

    try:
        _wait(panel_mapped, 15, "trayer's panel")
    except RuntimeError:
        process.kill()
        raise
    return tray


@dataclass
class Pulse:
    env: dict[str, str]  # what every client (the app, paplay, pactl) needs in its environment
    started: bool = False
    keeper: subprocess.Popen | None = None
    runtime_dir: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True, **kwargs)

    def play(self, wav: Path) -> None:
        """Play a file into the sink (returns when it has been played)."""
        result = self.run("paplay", f"--device={SINK}", str(wav), timeout=120)
        assert result.returncode == 0, result.stderr

    def stop(self) -> None:
        if self.keeper is not None:
            self.keeper.terminate()
            self.keeper.wait(timeout=10)
        if self.started:
            self.run("pulseaudio", "--kill")
            # --kill only signals the daemon, which writes in its runtime folder until it is gone:
            # removing the folder before then failed now and then ("Directory not empty").
            _wait(lambda: self.run("pulseaudio", "--check").returncode != 0, 10, "PulseAudio to exit")
        if self.runtime_dir is not None:
            self.runtime_dir.cleanup()


def _pulse_up(env: dict[str, str]) -> bool:
    return subprocess.run(["pactl", "info"], env={**os.environ, **env}, capture_output=True).returncode == 0


def start_pulse() -> Pulse:
    """A PulseAudio daemon with the ``vsink`` null sink as default sink and its monitor as default source."""
    require("pulseaudio", "pactl", "paplay", "pacat")
    pulse = Pulse({"XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "")})
    if not (pulse.env["XDG_RUNTIME_DIR"] and _pulse_up(pulse.env)):
        pulse.runtime_dir = tempfile.TemporaryDirectory(prefix="sayso-pulse-")
        os.chmod(pulse.runtime_dir.name, 0o700)
        pulse.env = {"XDG_RUNTIME_DIR": pulse.runtime_dir.name}
        result = pulse.run(
            "pulseaudio", "--daemonize=yes", "--exit-idle-time=-1", "--disable-shm=yes", "-n",
            "--load=module-native-protocol-unix auth-anonymous=1",
            f"--load=module-null-sink sink_name={SINK} rate=16000 channels=1",
        )  # fmt: skip
        assert result.returncode == 0, f"pulseaudio didn't start: {result.stderr}"
        pulse.started = True
        _wait(lambda: _pulse_up(pulse.env), 15, "PulseAudio")
    elif SINK not in pulse.run("pactl", "list", "short", "sinks").stdout:
        pulse.run("pactl", "load-module", "module-null-sink", f"sink_name={SINK}", "rate=16000", "channels=1")
    pulse.run("pactl", "set-default-sink", SINK)
    pulse.run("pactl", "set-default-source", f"{SINK}.monitor")
    pulse.keeper = subprocess.Popen(
        [
            "pacat",
            "--playback",
            "--latency-msec=20",
            f"--device={SINK}",
            "--raw",
            "--format=s16le",
            "--rate=16000",
            "--channels=1",
            "/dev/zero",
        ],
        env={**os.environ, **pulse.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def low_latency() -> bool:
        for line in pulse.run("pactl", "list", "sinks").stdout.splitlines():
            if line.strip().startswith("Latency:"):
                return int(line.split()[1]) < 50000  # microseconds
        return False

    _wait(low_latency, 15, "the null sink to run in real time")
    return pulse


SESSION_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{folder}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
"""The system's session.conf with one change: its only service folder is the bus's own, empty one. The
system's lists the installed services (``<standard_session_servicedirs/>``), so a call to a name that no
double owns yet would start the machine's real service (xdg-desktop-portal), which then keeps the name."""


@dataclass
class SessionBus:
    """A private D-Bus session bus that starts no service of the machine's, so portal doubles never meet
    the user's portal or a real one."""

    address: str
    process: subprocess.Popen
    folder: Path  # its socket and its (empty) service folder

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_session_bus() -> SessionBus:
    require("dbus-daemon")
    folder = Path(tempfile.mkdtemp(prefix="sayso-bus-"))
    config = folder / "session.conf"
    config.write_text(SESSION_BUS_CONFIG.format(folder=folder))
    process = subprocess.Popen(["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address=1"],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    return SessionBus(process.stdout.readline().strip(), process, folder)


@dataclass
class NotificationDaemon:
    """dunst on an X display and a session bus, writing each notification it shows to ``received``
    (one ``summary<TAB>body`` line each, by a dunst rule's script)."""

    received: Path
    process: subprocess.Popen

    def lines(self) -> list[str]:
        return self.received.read_text().splitlines() if self.received.exists() else []

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_notification_daemon(folder: Path) -> NotificationDaemon:
    """dunst in the caller's environment (DISPLAY and DBUS_SESSION_BUS_ADDRESS), owning
    org.freedesktop.Notifications before this returns."""
    require("dunst")
    received, script, config = folder / "notifications.txt", folder / "record.sh", folder / "dunstrc"
    script.write_text(f"#!/bin/sh\nprintf '%s\\t%s\\n' \"$2\" \"$3\" >> {received}\n")
    script.chmod(0o755)
    config.write_text(f'[global]\n    font = Monospace 8\n\n[record]\n    summary = "*"\n    script = {script}\n')
    process = subprocess.Popen(["dunst", "-config", str(config)], stderr=subprocess.DEVNULL)
    _wait(lambda: _bus_has("org.freedesktop.Notifications"), 15, "dunst on the bus")
    return NotificationDaemon(received, process)


def _bus_has(name: str) -> bool:
    from jeepney import message_bus
    from jeepney.io.blocking import open_dbus_connection

    with open_dbus_connection(bus="SESSION") as connection:
        return bool(connection.send_and_get_reply(message_bus.NameHasOwner(name)).body[0])


@dataclass
class Sway:
    """A headless sway (wlroots' headless backend, pixman rendering): a real Wayland compositor with no
    screen. ``display`` is its socket's absolute path, which Wayland clients take as WAYLAND_DISPLAY."""

    folder: Path
    process: subprocess.Popen
    user: list[str]  # the command prefix that runs as sway's user (sway refuses to run as root)

    @property
    def display(self) -> str:
        return str(self.folder / "wayland-1")

    def windows(self) -> list[dict]:
        """Every window sway manages (tiled or floating): its app_id, title, pid, rectangle and whether it
        has the focus. Layer surfaces (panels, overlays) are no windows: sway's tree doesn't hold them."""
        socket = next(self.folder.glob("sway-ipc.*.sock"))
        tree = subprocess.run([*self.user, "swaymsg", "-s", str(socket), "-t", "get_tree", "-r"],
                              capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
        found: list[dict] = []

        def walk(node: dict) -> None:
            if node.get("type") in ("con", "floating_con") and node.get("pid"):
                found.append({k: node.get(k) for k in ("app_id", "name", "pid", "rect", "focused")})
            for child in node.get("nodes", []) + node.get("floating_nodes", []):
                walk(child)

        walk(json.loads(tree))
        return found

    def screenshot(self, path: Path) -> np.ndarray:
        """What sway's output shows, layer surfaces included: saved as a PNG at ``path``, returned as
        (height, width, RGB) pixels. grim runs as sway's user and writes to its standard output, since
        that user may not write to ``path``'s folder."""
        from PySide6.QtGui import QImage

        require("grim")
        env = {"PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": str(self.folder), "WAYLAND_DISPLAY": self.display}
        shot = subprocess.run([*self.user, "env", *(f"{k}={v}" for k, v in env.items()), "grim", "-"],
                              capture_output=True, timeout=30, check=True)  # fmt: skip
        path.write_bytes(shot.stdout)
        image = QImage.fromData(shot.stdout).convertToFormat(QImage.Format.Format_RGB888)
        rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
        pixels = rows[:, : image.width() * 3].reshape(image.height(), image.width(), 3)
        return pixels.copy()  # a copy: the buffer dies with the QImage

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_sway() -> Sway:
    """sway on its own 0700 runtime folder, as ``nobody`` when the tests run as root."""
    require("sway", "swaymsg")
    folder = Path(tempfile.mkdtemp(prefix="sway-"))
    user: list[str] = []
    if os.getuid() == 0:
        shutil.chown(folder, "nobody")
        user = ["runuser", "-u", "nobody", "--"]
    folder.chmod(0o700)
    config = folder / "config"
    # A binding of the user's: Sayso must leave a chord that the config binds alone (app.sway_shortcut).
    config.write_text("output HEADLESS-1 resolution 1280x800\nbindsym Ctrl+Mod1+F12 nop kept for the user\n")
    config.chmod(0o644)
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "XDG_RUNTIME_DIR": str(folder),
           "WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman"}  # fmt: skip
    process = subprocess.Popen([*user, "env", *(f"{k}={v}" for k, v in env.items()), "sway", "-c", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait(lambda: (folder / "wayland-1").exists() and any(folder.glob("sway-ipc.*.sock")), 20, "sway")
    return Sway(folder, process, user)
