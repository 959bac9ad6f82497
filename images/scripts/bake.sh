#!/usr/bin/env bash
# Boots a freshly assembled node image once under qemu (direct kernel boot, no
# network) so that the image's own containerd imports the preloaded container images
# at build time instead of at every VM boot. The guest side is knest-bake.target /
# knest-bake.service / usr/lib/knest/bake in rootfs/overlay: import, check, stop
# containerd, reset per-instance state, print "knest-bake: OK", power off.
#
# usage: bake.sh DISK.raw VMLINUZ INITRD "KERNEL ARGS" OUTDIR
# DISK.raw is only read (the VM writes to a qcow2 overlay). Writes OUTDIR/disk.raw
# (the baked filesystem, sparse) and OUTDIR/bake.log (the serial console). Fails with
# the console's tail when the VM does not report success and power off in time.
#
# Knobs: KNEST_BAKE_TIMEOUT (seconds, default 1200), KNEST_BAKE_CPUS (2),
# KNEST_BAKE_MEMORY_MIB (2048), KNEST_ACCEL (kvm or tcg; default: kvm-probe.sh decides).
set -euo pipefail

disk=${1:?usage: bake.sh DISK.raw VMLINUZ INITRD KERNEL_ARGS OUTDIR}
kernel=${2:?}
initrd=${3:?}
kernel_args=${4:?}
out=${5:?}
timeout_s=${KNEST_BAKE_TIMEOUT:-1200}
cpus=${KNEST_BAKE_CPUS:-2}
mem=${KNEST_BAKE_MEMORY_MIB:-2048}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
console=$out/bake.log
# The caller removes OUTDIR when this fails; the console log is kept next to it.
kept=${out%/}
kept=${kept%.tmp}.bake-failed.log
fail() {
	cp "$console" "$kept" 2>/dev/null || true
	printf 'ERROR: bake: %s\nlast lines of the serial console (all of it: %s):\n' "$1" "$kept" >&2
	tail -n 60 "$console" 2>/dev/null | tr -d '\r' >&2 || true
	exit 1
}

for tool in qemu-system-x86_64 qemu-img timeout e2fsck dumpe2fs debugfs; do
	command -v "$tool" >/dev/null || { echo "ERROR: $tool not found; on Debian: apt-get install qemu-system-x86 qemu-utils e2fsprogs" >&2; exit 1; }
done

overlay=$out/bake.qcow2
qemu-img create -q -f qcow2 -F raw -b "$disk" "$overlay"
# systemd.unit: boot only what the import needs (no kubelet, cloud-init, network).
# cloud-init=disabled: belt and braces, cloud-init must not record an instance.
# systemd.mask: no random seed and no wtmp record written at shutdown.
# panic=10 with -no-reboot: a kernel panic ends qemu instead of waiting for the timeout.
args="$kernel_args systemd.unit=knest-bake.target knest.bake=1 cloud-init=disabled"
args+=" systemd.mask=systemd-random-seed.service systemd.mask=systemd-update-utmp.service panic=10"
accel=$("$(dirname "$0")/kvm-probe.sh" "$kernel")
log "baking: booting the image once under qemu to import the preloaded images (${accel}, ${cpus} vCPU, ${mem} MiB, limit ${timeout_s} s)"
t0=$(date +%s)
rc=0
timeout --kill-after=30 "$timeout_s" qemu-system-x86_64 \
	-name knest-bake -machine "q35,accel=$accel" -cpu max -smp "$cpus" -m "$mem" \
	-nodefaults -display none -no-reboot -serial "file:$console" \
	-kernel "$kernel" -initrd "$initrd" -append "$args" \
	-drive "if=virtio,format=qcow2,discard=unmap,cache=unsafe,file=$overlay" \
	-object rng-random,id=rng0,filename=/dev/urandom -device virtio-rng-pci,rng=rng0 \
	</dev/null || rc=$?
took=$(($(date +%s) - t0))
if ((rc == 124 || rc == 137)); then
	fail "the VM did not power off within ${timeout_s} s (KNEST_BAKE_TIMEOUT)"
elif ((rc != 0)); then
	fail "qemu exited with status $rc after ${took} s"
fi
grep -a 'knest-bake: FAILED' "$console" | tr -d '\r' >&2 || true
grep -aq 'knest-bake: OK' "$console" || fail "the VM powered off after ${took} s without reporting success"
grep -aq 'reboot: Power down' "$console" || fail "the VM stopped after ${took} s without a clean power-off"
log "bake: VM powered off after ${took} s; $(grep -a -o 'knest-bake: [0-9]* images imported.*' "$console" | tr -d '\r' | head -1)"

qemu-img convert -O raw "$overlay" "$out/disk.raw"
rm -f "$overlay"

# Checks on the result, without mounting it: the filesystem was unmounted cleanly,
# the images are in, and nothing of the bake boot's identity is left.
raw=$out/disk.raw
e2fsck -fn "$raw" >"$out/e2fsck.log" 2>&1 || { cat "$out/e2fsck.log" >&2; fail "the baked filesystem does not check clean"; }
rm -f "$out/e2fsck.log"
dumpe2fs -h "$raw" 2>/dev/null | grep -q '^Filesystem state: *clean$' || fail "the baked filesystem was not unmounted cleanly"
stat_of() { debugfs -R "stat $1" "$raw" 2>&1; }
exists() { stat_of "$1" | grep -q '^Inode:'; }
for p in /var/lib/knest/images-imported /var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db; do
	exists "$p" || fail "$p is missing from the baked image"
done
for p in /var/lib/cloud /var/lib/systemd/random-seed /var/lib/systemd/timers /var/lib/knest/images/images.tar; do
	if exists "$p"; then fail "$p is left in the baked image"; fi
done
stat_of /etc/machine-id | grep -Eq 'Size: 0($|[^0-9])' || fail "/etc/machine-id is not empty in the baked image"
if debugfs -R "ls /etc/ssh" "$raw" 2>/dev/null | grep -q ssh_host_; then fail "SSH host keys are left in the baked image"; fi
log "bake: done in $(($(date +%s) - t0)) s"
