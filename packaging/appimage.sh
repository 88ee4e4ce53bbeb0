#!/usr/bin/env bash
# Wraps the one-folder app (dist/sayso/, from packaging/build.sh) into an AppImage: lays out
# build/Sayso.AppDir (AppRun, the desktop entry, icons, AppStream metainfo), packs it as a zstd squashfs
# (Debian's squashfs-tools) behind the AppImage runtime (packaging/appimage_runtime.sh), then checks it
# as a user's first start (packaging/first_start.sh: an empty HOME, no network, the bundled model).
#   bash packaging/appimage.sh SPEECH.wav    # -> dist/Sayso-x86_64.AppImage
set -euo pipefail
cd "$(dirname "$0")/.."
sample="$(realpath "${1:?usage: bash packaging/appimage.sh SPEECH.wav}")"
[[ -x dist/sayso/sayso ]] || { echo "No dist/sayso: run bash packaging/build.sh first" >&2; exit 1; }
runtime=build/appimage-runtime/runtime-x86_64
[[ -x $runtime ]] || bash packaging/appimage_runtime.sh
. packaging/apt.sh
apt_install squashfs-tools

appdir=build/Sayso.AppDir
rm -rf "$appdir"
mkdir -p "$appdir/usr/lib" "$appdir/usr/share/applications" "$appdir/usr/share/metainfo"
cp -a dist/sayso "$appdir/usr/lib/sayso"
id=io.github.sayso.Sayso  # the AppStream id, the desktop entry's name
cp "packaging/$id.desktop" "$appdir/"
cp "packaging/$id.desktop" "$appdir/usr/share/applications/"
cp "packaging/$id.metainfo.xml" "$appdir/usr/share/metainfo/"
for size in 16 24 32 48 128 256 512; do
    mkdir -p "$appdir/usr/share/icons/hicolor/${size}x${size}/apps"
    cp "resources/sayso-$size.png" "$appdir/usr/share/icons/hicolor/${size}x${size}/apps/sayso.png"
done
cp resources/sayso-256.png "$appdir/sayso.png"
ln -s sayso.png "$appdir/.DirIcon"
cat > "$appdir/AppRun" <<'RUN'
#!/bin/sh
# The AppImage's entry point: `sayso` with the arguments given (--toggle, transcribe FILE, ...).
here="$(dirname "$(readlink -f "$0")")"
exec "$here/usr/lib/sayso/sayso" "$@"
RUN
chmod +x "$appdir/AppRun"

start=$SECONDS
mksquashfs "$appdir" build/Sayso.squashfs -root-owned -noappend -comp zstd -quiet
cat "$runtime" build/Sayso.squashfs > dist/Sayso-x86_64.AppImage
chmod +x dist/Sayso-x86_64.AppImage
rm build/Sayso.squashfs
echo "Built dist/Sayso-x86_64.AppImage in $((SECONDS - start)) s: $(du -h dist/Sayso-x86_64.AppImage | cut -f1)"

# Where FUSE can't mount it, the runtime extracts the image to a temporary folder and runs it from there.
bash packaging/first_start.sh dist/Sayso-x86_64.AppImage "$sample"
