#!/usr/bin/env bash
# Builds the version-independent base of the node image: a Debian bookworm root
# filesystem from Debian packages (images/rootfs/packages.txt), written as a tarball
# with the kernel and initrd next to it. Configuration (images/rootfs/overlay) is
# applied later, when the disk is assembled, so changing it does not re-run this.
#
# usage: build-rootfs.sh OUTDIR
# OUTDIR/rootfs.tar, OUTDIR/vmlinuz, OUTDIR/initrd.img, OUTDIR/packages.lock appear
# only when everything succeeded (the caller moves a .tmp directory into place).
set -euo pipefail

out=${1:?usage: build-rootfs.sh OUTDIR}
here=$(cd "$(dirname "$0")/.." && pwd)
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

for tool in mmdebstrap tar; do
	command -v "$tool" >/dev/null || { echo "ERROR: $tool not found; install it (apt-get install mmdebstrap)" >&2; exit 1; }
done

mkdir -p "$out"
packages=$(grep -v '^\s*#' "$here/rootfs/packages.txt" | grep -v '^\s*$' | paste -sd, -)

# Documentation, man pages and translations are never read on a node.
mmdebstrap \
	--mode=root \
	--variant=minbase \
	--include="$packages" \
	--aptopt='APT::Install-Recommends "false"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--setup-hook='mkdir -p "$1/etc/initramfs-tools/conf.d"' \
	--setup-hook='echo "MODULES=most" > "$1/etc/initramfs-tools/conf.d/knest"' \
	--customize-hook='chroot "$1" dpkg-query -W -f="\${Package}=\${Version}\n" > "$1/tmp/packages.lock"' \
	--customize-hook="cp \"\$1/tmp/packages.lock\" '$out/packages.lock'" \
	--customize-hook="cp -L \"\$1\"/boot/vmlinuz-*-amd64 '$out/vmlinuz'" \
	--customize-hook="cp -L \"\$1\"/boot/initrd.img-*-amd64 '$out/initrd.img'" \
	--customize-hook='rm -f "$1"/etc/ssh/ssh_host_* "$1/tmp/packages.lock"' \
	--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
	--customize-hook=': > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"; : > "$1/etc/hostname"' \
	--customize-hook='ln -sf /run/systemd/resolve/stub-resolv.conf "$1/etc/resolv.conf"' \
	"$suite" "$out/rootfs.tar" "$mirror"

chmod 0644 "$out/vmlinuz" "$out/initrd.img"
