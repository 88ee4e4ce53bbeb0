#!/usr/bin/env bash
# Builds the AppImage runtime (the ELF at the front of every type-2 AppImage, which mounts or extracts
# the squashfs appended to it) from AppImage/type2-runtime's source, with Debian's packages only, as a
# static binary: build/appimage-runtime/runtime-x86_64.
#   bash packaging/appimage_runtime.sh [SOURCE]   # SOURCE: a checkout of type2-runtime; default: cloned
#
# No package registry carries the runtime or its source: Debian has libappimage and squashfuse but not the
# runtime, and the AppImage builders on PyPI (appimage, python-appimage, pyproject-appimage,
# appimage-builder) and npm (@reforged/maker-appimage) download it from type2-runtime's GitHub releases
# as they build. So the source is cloned from GitHub here; on a machine without GitHub, pass a checkout.
# Upstream builds it on Alpine (musl, squashfuse 0.5, a patched libfuse 3.15); here it is glibc, Debian's
# squashfuse 0.1 and libfuse 3.14, unpatched, so FUSE mounts find only fusermount3 (extract-and-run
# needs no FUSE at all). LZO images are refused: liblzo2 is GPL and the squashfs here is zstd.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=caf24f9f712084686bfc24a70b75e50df0aefb9c  # type2-runtime, 8 November 2025 (MIT licence)
packages=(gcc libc6-dev binutils file pkg-config libsquashfuse-dev libfuse3-dev zlib1g-dev libzstd-dev
          liblzma-dev liblz4-dev)
. packaging/apt.sh
apt_install "${packages[@]}"
# The header below restates squashfuse 0.1's option struct, which its -dev package doesn't install.
[[ $(pkg-config --modversion squashfuse) == 0.1.* ]] || { echo "needs squashfuse 0.1 (Debian 12)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source_dir="${1:-}"
if [[ -z "$source_dir" ]]; then
    git clone -q https://github.com/AppImage/type2-runtime "$work/source"
    git -C "$work/source" checkout -q "$COMMIT"
    source_dir="$work/source"
fi
cp "$source_dir"/src/runtime/{runtime.c,data_sections.ld} "$work/"
mkdir -p "$work/include/squashfuse"
cat > "$work/include/squashfuse/fuseprivate.h" <<'HEADER'
/* squashfuse 0.1's fuseprivate.h, as the runtime includes it (Debian's libsquashfuse-dev lacks it). */
#ifndef SQFS_FUSEPRIVATE_H
#define SQFS_FUSEPRIVATE_H
#include <squashfuse/squashfuse.h>
#include <fuse3/fuse.h>
#include <fuse3/fuse_lowlevel.h>
int sqfs_listxattr(sqfs *fs, sqfs_inode *inode, char *buf, size_t *size);
void sqfs_usage(char *progname, bool fuse_usage);
#define sqfs_usage(progname, fuse_usage, ll_usage) sqfs_usage((progname), (fuse_usage))
typedef struct {
    char *progname;
    const char *image;
    int mountpoint;
    size_t offset;
    unsigned int idle_timeout_secs;
} sqfs_opts;
int sqfs_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs);
int sqfs_statfs(sqfs *sq, struct statvfs *st);
#endif
HEADER
# Debian's libsquashfuse.a calls liblzo2 for LZO images; this stand-in refuses them instead.
printf '%s\n' '#include <stddef.h>' \
    'int lzo1x_decompress_safe(const unsigned char *s, size_t sl, unsigned char *d, size_t *dl, void *w)' \
    '{ (void)s; (void)sl; (void)d; (void)dl; (void)w; return -1; }' > "$work/no_lzo.c"
(
    cd "$work"
    # Upstream's flags (src/runtime/Makefile), without mimalloc, which Debian has no static library of.
    gcc -std=gnu99 -Os -D_FILE_OFFSET_BITS=64 -DGIT_COMMIT="\"$COMMIT\"" -Iinclude -I/usr/include/fuse3 \
        -T data_sections.ld -ffunction-sections -fdata-sections -Wl,--gc-sections -static-pie \
        runtime.c no_lzo.c -lsquashfuse_ll -lsquashfuse -lfuse3 -lzstd -lz -llzma -llz4 -lpthread -o runtime \
        2> >(grep -v "dlopen\|fuse_get_module" >&2)  # libfuse's module loader, never called by the runtime
    strip --strip-debug --strip-unneeded runtime
    printf 'AI\x02' | dd of=runtime bs=1 count=3 seek=8 conv=notrunc status=none  # the type-2 magic
)
file "$work/runtime" | grep -q "static-pie linked" || { echo "the runtime isn't static" >&2; exit 1; }
mkdir -p build/appimage-runtime
cp "$work/runtime" build/appimage-runtime/runtime-x86_64
echo "Built build/appimage-runtime/runtime-x86_64 ($(stat -c %s build/appimage-runtime/runtime-x86_64) bytes)"
