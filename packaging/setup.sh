#!/usr/bin/env bash
# Sets Sayso up on a fresh Debian/Ubuntu machine: system libraries, a virtual environment `.venv` at the
# repository root with the `sayso` command in it, and Sayso's desktop entry and icon for the user.
#   bash packaging/setup.sh          # what the app needs
#   bash packaging/setup.sh --test   # plus what the test suite needs (Xvfb, PulseAudio, xdotool, espeak-ng, ...,
#                                    # and Ray for sayso[cluster])
# Python packages are installed at the versions pinned in packaging/constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

# xdotool and x11-utils deliver the text on X11, wtype and wl-clipboard on Wayland
runtime=(libvulkan1 mesa-vulkan-drivers libportaudio2 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
         libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3 xdotool xclip x11-utils wtype wl-clipboard)
testing=(xvfb xauth xterm trayer pulseaudio pulseaudio-utils libasound2-plugins dbus-daemon dunst
         desktop-file-utils appstream sway foot grim espeak-ng python3-gi gir1.2-gtk-3.0)
packages=("${runtime[@]}")
extras=""
if [[ "${1:-}" == "--test" ]]; then
    packages+=("${testing[@]}")
    extras="[test,cluster]"
fi

. packaging/apt.sh
apt_install "${packages[@]}"

[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c packaging/constraints.txt -e ".${extras}"
bash packaging/desktop_entry.sh "$PWD/.venv/bin/sayso"
echo "Sayso is set up: run .venv/bin/sayso"
