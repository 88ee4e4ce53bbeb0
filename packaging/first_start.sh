#!/usr/bin/env bash
# Checks a built Sayso (the one-folder app or the AppImage) as a user's first start: an empty HOME, no
# network (a private network namespace), offscreen, a speech file transcribed with voice detection on by
# the model that ships inside it, which must not be converted again.
#   bash packaging/first_start.sh PROGRAM SPEECH.wav
set -euo pipefail
program="$(realpath "$1")"
sample="$(realpath "$2")"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
mkdir -m 700 "$home/runtime"
# unshare -n needs root or user namespaces (unshare -rn); a machine with neither runs it with the network.
offline=(unshare -n)
unshare -n true 2>/dev/null || offline=(unshare -rn)
"${offline[@]}" true 2>/dev/null || { echo "No network namespace here: the check runs online" >&2; offline=(); }
start=$SECONDS
env -i PATH="$PATH" HOME="$home" XDG_RUNTIME_DIR="$home/runtime" QT_QPA_PLATFORM=offscreen \
    "${offline[@]}" "$program" --selftest "$sample"
# A first start that converted the default model again would have written it here.
[[ ! -e $home/.local/share/sayso/models ]] || { echo "$program converted its default model again" >&2; exit 1; }
echo "Selftest passed in $((SECONDS - start)) s (empty HOME, ${offline[*]:-network on}, the bundled model)"
