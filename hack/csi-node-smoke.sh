#!/usr/bin/env bash
# Runs knest's CSI node plugin as its DaemonSet runs it on a tenant node (pkg/csi/deploy)
# and drives a volume through its life on a real disk (a loop device), on this machine:
# a root file system holding only /knest-csi (its image's content), the machine's /usr,
# /bin, /sbin, /lib and /lib64 mounted read-only (where the plugin's mount, mkfs.ext4,
# blkid and resize2fs come from), /dev, and kubelet's directory shared both ways
# (Bidirectional), so the mounts the plugin makes must show on the machine. The disk
# is found by its serial's /dev/disk/by-id name, linked in a stand-in directory.
# hack/csinodesmoke makes kubelet's calls and checks the mounts. Expansion needs
# CAP_SYS_RESOURCE (ext4's online resize), which some machines' root lacks: it is
# skipped there. Needs root, util-linux (unshare, losetup) and e2fsprogs.
#
# Usage: hack/csi-node-smoke.sh (GO: the go command).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
[ "$(id -u)" = 0 ] || { echo "ERROR: runs as root (loop devices, mounts)" >&2; exit 1; }
work=$(mktemp -d /tmp/knest-csi-smoke.XXXXXX)
root=$work/root kubelet=$work/kubelet pid="" loop=""
cleanup() {
	set +e
	[ -z "$pid" ] || { kill "$pid"; wait "$pid"; }
	[ -z "$loop" ] || losetup -d "$loop"
	umount -R "$root" 2>/dev/null
	umount -R "$kubelet" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$work/knest-csi" ./cmd/knest-csi
$GO build -o "$work/smoke" ./hack/csinodesmoke

mkdir -p "$root" "$kubelet/plugins/csi.knest.dev" "$kubelet/plugins_registry" "$kubelet/by-id"
for d in usr bin sbin lib lib64 dev proc csi registration var/lib/kubelet; do mkdir -p "$root/$d"; done
cp "$work/knest-csi" "$root/knest-csi"
# kubelet's directory shared, as on a node; the container's root private, as a
# runtime makes it.
mount --bind "$kubelet" "$kubelet" && mount --make-shared "$kubelet"
mount --bind "$root" "$root" && mount --make-private "$root"

volume=csi-smoke-0123456789abcdef
serial=$(printf %s "$volume" | sha256sum | cut -c1-20) # pkg/csi.SerialFor
truncate -s 64M "$work/disk.img"
loop=$(losetup -f --show "$work/disk.img")
ln -s "$loop" "$kubelet/by-id/scsi-0QEMU_QEMU_HARDDISK_$serial"

unshare -m --propagation unchanged sh -c '
	set -e
	root=$1 kubelet=$2
	for d in usr bin sbin lib lib64; do mount --bind "/$d" "$root/$d" && mount -o remount,bind,ro "$root/$d"; done
	mount --rbind /dev "$root/dev"
	mount -t proc proc "$root/proc"
	mount --rbind "$kubelet" "$root/var/lib/kubelet" && mount --make-rshared "$root/var/lib/kubelet"
	mount --bind "$kubelet/plugins/csi.knest.dev" "$root/csi"
	mount --bind "$kubelet/plugins_registry" "$root/registration"
	exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin chroot "$root" /knest-csi node \
		--node-id smoke --endpoint unix:///csi/csi.sock --registration-dir /registration \
		--disk-dir /var/lib/kubelet/by-id --health-address ""
' _ "$root" "$kubelet" >"$work/node.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$kubelet/plugins_registry/csi.knest.dev-reg.sock" ] && break; sleep 0.1; done
[ -S "$kubelet/plugins_registry/csi.knest.dev-reg.sock" ] || { cat "$work/node.log" >&2; echo "ERROR: the node plugin did not come up" >&2; exit 1; }
echo "✓ node plugin up, registration socket in kubelet's registry"

grow=""
cap=$(awk '$1 == "CapEff:" {print $2}' /proc/self/status)
if (((0x$cap >> 24) & 1)); then
	grow="truncate -s 128M $work/disk.img && losetup -c $loop"
else
	echo "- expand skipped: no CAP_SYS_RESOURCE here (ext4's online resize needs it)"
fi
if ! "$work/smoke" -socket "$kubelet/plugins/csi.knest.dev/csi.sock" -kubelet-dir "$kubelet" -volume "$volume" -grow "$grow"; then
	cat "$work/node.log" >&2
	exit 1
fi
kill "$pid" && wait "$pid" || { cat "$work/node.log" >&2; echo "ERROR: the node plugin did not stop cleanly on SIGTERM" >&2; exit 1; }
pid=""
[ ! -e "$kubelet/plugins_registry/csi.knest.dev-reg.sock" ] || { echo "ERROR: the registration socket outlived the plugin" >&2; exit 1; }
echo "✓ stopped on SIGTERM, registration socket removed"
