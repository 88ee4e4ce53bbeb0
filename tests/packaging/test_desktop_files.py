"""The desktop entry and the AppStream metainfo that the bundle, the AppImage and distribution packages
install pass their validators, and agree with each other."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ElementTree

from support.data import ROOT
from sayso.app.platform.locations import DESKTOP_ID

DESKTOP = ROOT / "packaging" / f"{DESKTOP_ID}.desktop"
METAINFO = ROOT / "packaging" / f"{DESKTOP_ID}.metainfo.xml"


def test_the_desktop_entry_validates_without_hints():
    run = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True)
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout


def test_the_metainfo_validates_and_names_the_desktop_entry():
    run = subprocess.run(["appstreamcli", "validate", "--no-net", str(METAINFO)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert "Validation was successful" in run.stdout
    component = ElementTree.parse(METAINFO).getroot()
    assert component.findtext("id") == DESKTOP_ID and component.findtext("launchable") == DESKTOP.name
    assert component.findtext("url[@type='homepage']").startswith("https://")


def test_the_metainfo_screenshots_are_the_repositorys_own():
    """Each screenshot's address is a file of the repository (docs/screenshots: pages the UI tests
    photograph), at the repository's address that the homepage gives."""
    component = ElementTree.parse(METAINFO).getroot()
    repository = component.findtext("url[@type='homepage']").removeprefix("https://github.com/")
    prefix = f"https://raw.githubusercontent.com/{repository}/main/"
    images = [image.text for image in component.findall("screenshots/screenshot/image")]
    assert len(images) >= 2 and len(component.findall("screenshots/screenshot[@type='default']")) == 1
    for image in images:
        assert image.startswith(prefix), image
        assert (ROOT / image.removeprefix(prefix)).read_bytes().startswith(b"\x89PNG"), image
    assert component.findtext("provides/binary") == "sayso"
    entry = dict(line.split("=", 1) for line in DESKTOP.read_text().splitlines() if "=" in line)
    categories = [c.text for c in component.findall("categories/category")]
    assert entry["Categories"].rstrip(";").split(";") == categories


def test_setup_installs_the_desktop_entry_and_icon_for_the_user(tmp_path):
    """What setup.sh runs last: the entry, in the user's data folder, starts the virtual environment's
    `sayso` by its path (a venv isn't on PATH), validates, and finds its icon in the user's theme."""
    sayso = ROOT / ".venv" / "bin" / "sayso"
    setup = (ROOT / "packaging" / "setup.sh").read_text()
    assert 'bash packaging/desktop_entry.sh "$PWD/.venv/bin/sayso"' in setup
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    earlier = tmp_path / "data" / "applications" / "sayso.desktop"  # the entry's name before it was the id
    earlier.parent.mkdir(parents=True)
    earlier.write_text("[Desktop Entry]\nType=Application\nName=Sayso\nExec=sayso\n")
    run = subprocess.run(["bash", str(ROOT / "packaging" / "desktop_entry.sh"), str(sayso)], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    entry = tmp_path / "data" / "applications" / f"{DESKTOP_ID}.desktop"
    assert entry.is_file() and not earlier.exists()
    valid = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
    assert valid.returncode == 0 and not valid.stdout.strip(), valid.stdout
    execs = [line.split("=", 1)[1] for line in entry.read_text().splitlines() if line.startswith("Exec=")]
    assert execs == [f'"{sayso}" %F', f'"{sayso}" --toggle']
    started = subprocess.run([str(sayso), "--version"], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0 and "sayso" in started.stdout
    icons = tmp_path / "data" / "icons" / "hicolor"
    assert (icons / "scalable" / "apps" / "sayso.svg").is_file() and (icons / "48x48" / "apps" / "sayso.png").is_file()


def test_setup_installs_the_tools_that_deliver_text_on_x11_and_wayland():
    """The app's own packages, not only the tests': Wayland delivery needs wtype and wl-clipboard."""
    setup = ROOT / "packaging" / "setup.sh"
    script = f"""eval "$(sed -n '/^runtime=(/,/)$/p' '{setup}')"; printf '%s\\n' "${{runtime[@]}}" """
    runtime = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert {"xdotool", "x11-utils", "wtype", "wl-clipboard"} <= set(runtime)
