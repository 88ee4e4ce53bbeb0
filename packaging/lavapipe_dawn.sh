#!/usr/bin/env bash
# A software Vulkan driver that Dawn (wgpudawn) runs on, for the GPU tests without a GPU: Mesa 25's
# lavapipe from Debian 12's backports, unpacked into .cache/mesa25 beside the system's Mesa, which
# stays as it is. Dawn refuses Debian 12's own lavapipe (Mesa 22.3): it lacks Vulkan features Dawn
# requires. Prints the environment that selects the driver, for `env $(bash packaging/lavapipe_dawn.sh) CMD`.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(mesa-vulkan-drivers=25.0.7-2~bpo12+1 libdrm2=2.4.123-1~bpo12+1 libdrm-amdgpu1=2.4.123-1~bpo12+1)
folder="$PWD/.cache/mesa25"
icd="$folder/lvp.json"
libs="$folder/root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")"

if [[ ! -f "$icd" || ! -f "$libs/libvulkan_lvp.so" ]]; then
    . /etc/os-release
    if [[ "${VERSION_CODENAME:-}" != bookworm ]]; then
        echo "lavapipe_dawn.sh takes Mesa 25 from Debian 12's backports; this is ${PRETTY_NAME:-not Debian 12}." >&2
        exit 1
    fi
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\n%s\n' \
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
            $sudo tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
    fi
    $sudo apt-get update -qq
    rm -rf "$folder" && mkdir -p "$folder/debs"
    # apt-get download only fetches: nothing of the system changes.
    (cd "$folder/debs" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}")
    for deb in "$folder"/debs/*.deb; do dpkg -x "$deb" "$folder/root"; done
    # The package's ICD names the library bare; this one points at the unpacked copy.
    sed "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$libs/libvulkan_lvp.so\"|" \
        "$folder/root/usr/share/vulkan/icd.d/lvp_icd.json" >"$icd"
fi
echo "VK_DRIVER_FILES=$icd LD_LIBRARY_PATH=$libs"
