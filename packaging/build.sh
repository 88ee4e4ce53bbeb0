#!/usr/bin/env bash
# Builds Sayso as a one-folder Linux app (dist/sayso/, run dist/sayso/sayso) with PyInstaller, then
# checks it as a user's first start: an empty HOME and no network (a private network namespace), the
# default model converted into the fresh data folder and a speech file transcribed with voice
# detection on, offscreen, without the GUI.
#   bash packaging/build.sh SPEECH.wav
set -euo pipefail
cd "$(dirname "$0")/.."
sample="$(realpath "${1:?usage: bash packaging/build.sh SPEECH.wav}")"
[[ -x .venv/bin/python ]] || { echo "No .venv: run bash packaging/setup.sh first" >&2; exit 1; }
.venv/bin/python -m pip install -q "pyinstaller>=6.10"

start=$SECONDS
# The package as a wheel installs it (the development install maps the repository's folders instead).
rm -rf build/site
.venv/bin/python -m pip install -q --no-deps --target build/site .
.venv/bin/python -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/sayso.spec
echo "Built dist/sayso in $((SECONDS - start)) s: $(du -sh dist/sayso | cut -f1)"

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
mkdir -m 700 "$home/runtime"
start=$SECONDS
# unshare -n needs root or user namespaces (unshare -rn); a machine with neither runs it with the network.
offline=(unshare -n)
unshare -n true 2>/dev/null || offline=(unshare -rn)
"${offline[@]}" true 2>/dev/null || { echo "No network namespace here: the check runs online" >&2; offline=(); }
env -i PATH="$PATH" HOME="$home" XDG_RUNTIME_DIR="$home/runtime" QT_QPA_PLATFORM=offscreen "${offline[@]}" dist/sayso/sayso --selftest "$sample"
echo "Selftest passed in $((SECONDS - start)) s (empty HOME, ${offline[*]:-network on})"
