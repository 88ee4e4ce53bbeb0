"""The desktop entry and the AppStream metainfo that the bundle, the AppImage and distribution packages
install pass their validators, and agree with each other."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ElementTree

from conftest import ROOT

DESKTOP = ROOT / "packaging" / "sayso.desktop"
METAINFO = ROOT / "packaging" / "io.github.sayso.Sayso.metainfo.xml"


def test_the_desktop_entry_validates_without_hints():
    run = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True)
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout


def test_the_metainfo_validates_and_names_the_desktop_entry():
    run = subprocess.run(["appstreamcli", "validate", "--no-net", str(METAINFO)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert "Validation was successful" in run.stdout
    component = ElementTree.parse(METAINFO).getroot()
    assert component.findtext("launchable") == DESKTOP.name
    assert component.findtext("provides/binary") == "sayso"
    entry = dict(line.split("=", 1) for line in DESKTOP.read_text().splitlines() if "=" in line)
    categories = [c.text for c in component.findall("categories/category")]
    assert entry["Categories"].rstrip(";").split(";") == categories
