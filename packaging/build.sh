#!/usr/bin/env bash
# Builds Sayso as a one-folder Linux app (dist/sayso/, run dist/sayso/sayso) with PyInstaller, then
# checks it as a user's first start (packaging/first_start.sh: an empty HOME, no network, the bundled
# model).
#   bash packaging/build.sh SPEECH.wav
#
# The bundle freezes a runtime environment of its own (build/bundle-venv: Sayso as a wheel installs it,
# its dependencies at the versions of packaging/constraints.txt, and PyInstaller), never the development
# .venv, whose test packages would come along. The default model is converted there before the freeze
# and shipped as its GGUF file, in place of its CTranslate2 source package.
set -euo pipefail
cd "$(dirname "$0")/.."
sample="$(realpath "${1:?usage: bash packaging/build.sh SPEECH.wav}")"

start=$SECONDS
venv=build/bundle-venv
rm -rf "$venv" build/bundled-models build/bundle-data
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q -c packaging/constraints.txt . "pyinstaller>=6.10"
# The engine's own first-start conversion, into a data folder of the build's (-P: the installed sayso,
# not the repository's folder of that name).
SAYSO_DATA_DIR=build/bundle-data "$venv/bin/python" -P -c "from sayso.engine import models; models.default_model()"
mv build/bundle-data/models build/bundled-models
"$venv/bin/python" -P -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/sayso.spec
echo "Built dist/sayso in $((SECONDS - start)) s: $(du -sh dist/sayso | cut -f1)"

bash packaging/first_start.sh dist/sayso/sayso "$sample"
