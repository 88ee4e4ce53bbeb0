#!/usr/bin/env bash
# Installs Sayso's desktop entry and icon for the current user, in $XDG_DATA_HOME (else ~/.local/share),
# so that app launchers list Sayso and file managers offer it for audio and video files:
#   bash packaging/desktop_entry.sh COMMAND     # COMMAND: the absolute path of the `sayso` to run
# The entry runs COMMAND rather than `sayso`, which a virtual environment doesn't put on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
command="${1:?give the absolute path of the sayso command}"
if [[ "$command" != /* || "$command" =~ [\"\`\$\\] ]]; then
    echo "desktop_entry.sh: $command: give an absolute path without quotes, \$, \` or \\" >&2
    exit 2
fi
id=io.github.sayso.Sayso  # the AppStream id, which the entry's name must be (packaging/$id.metainfo.xml)
data="${XDG_DATA_HOME:-$HOME/.local/share}"
install -d "$data/applications"
sed "s|^Exec=sayso|Exec=\"$command\"|" "packaging/$id.desktop" > "$data/applications/$id.desktop"
rm -f "$data/applications/sayso.desktop"  # the entry's earlier name: one launcher, not two
for size in 16 24 32 48 64 128 256 512; do
    install -D -m 644 "resources/sayso-$size.png" "$data/icons/hicolor/${size}x${size}/apps/sayso.png"
done
install -D -m 644 resources/sayso.svg "$data/icons/hicolor/scalable/apps/sayso.svg"
if command -v update-desktop-database >/dev/null; then  # the file types it opens, for file managers
    update-desktop-database -q "$data/applications"
fi
echo "Sayso's desktop entry: $data/applications/$id.desktop"
