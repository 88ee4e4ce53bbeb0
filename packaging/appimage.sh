#!/usr/bin/env bash
# Wraps the one-folder app (dist/sayso/, from packaging/build.sh) into an AppImage: lays out
# build/Sayso.AppDir (AppRun, sayso.desktop, icons) and runs appimagetool on it.
#   bash packaging/appimage.sh               # -> dist/Sayso-x86_64.AppImage
# appimagetool is taken from $APPIMAGETOOL or PATH. Being an AppImage itself it needs FUSE; where
# there is none (containers, CI) it is run with --appimage-extract-and-run.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x dist/sayso/sayso ]] || { echo "No dist/sayso: run bash packaging/build.sh first" >&2; exit 1; }

appdir=build/Sayso.AppDir
rm -rf "$appdir"
mkdir -p "$appdir/usr/lib" "$appdir/usr/share/applications"
cp -a dist/sayso "$appdir/usr/lib/sayso"
cp packaging/sayso.desktop "$appdir/sayso.desktop"
cp packaging/sayso.desktop "$appdir/usr/share/applications/sayso.desktop"
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
echo "AppDir ready: $appdir"

tool="${APPIMAGETOOL:-$(command -v appimagetool || true)}"
if [[ -z "$tool" ]]; then
    echo "appimagetool not found: download it from the AppImage project's releases and set APPIMAGETOOL=path" >&2
    exit 1
fi
extract=()
[[ -e /dev/fuse ]] || extract=(--appimage-extract-and-run)
ARCH=x86_64 "$tool" "${extract[@]}" "$appdir" dist/Sayso-x86_64.AppImage
echo "Built dist/Sayso-x86_64.AppImage"
