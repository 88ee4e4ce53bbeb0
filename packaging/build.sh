#!/usr/bin/env bash
# Builds Sayso as a one-folder Linux app (dist/sayso/, run dist/sayso/sayso) with PyInstaller, then
# checks the result: the frozen app converts its default model in a fresh data folder and transcribes
# a speech file with it, offscreen, without the GUI.
#   bash packaging/build.sh                  # selftest on ../shared/audio/jfk.wav
#   bash packaging/build.sh speech.wav       # selftest on another file
set -euo pipefail
cd "$(dirname "$0")/.."
sample="${1:-../shared/audio/jfk.wav}"
[[ -x .venv/bin/python ]] || { echo "No .venv: run bash packaging/setup.sh first" >&2; exit 1; }
.venv/bin/python -m pip install -q "pyinstaller>=6.10"

start=$SECONDS
.venv/bin/python -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/sayso.spec
echo "Built dist/sayso in $((SECONDS - start)) s: $(du -sh dist/sayso | cut -f1)"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
start=$SECONDS
SAYSO_DATA_DIR="$data" QT_QPA_PLATFORM=offscreen dist/sayso/sayso --selftest "$sample"
echo "Selftest passed in $((SECONDS - start)) s"
