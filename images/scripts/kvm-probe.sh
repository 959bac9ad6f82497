#!/usr/bin/env bash
# Decides whether qemu may use KVM here, by booting KERNEL under it; prints "kvm" or
# "tcg" on stdout and why on stderr.
#
# /dev/kvm existing is not enough: on some machines it is there and answers KVM
# ioctls, but qemu aborts ("failed to set MSR 0x10a") or the guest kernel hangs right
# after "Probing EDD". So KVM is chosen only when the kernel boots under it all the way
# to its panic for want of a root filesystem (no initrd, no root=) within
# KNEST_KVM_PROBE_SECONDS (default 30; a working KVM needs 1-3). KNEST_ACCEL=kvm|tcg
# skips the probe.
#
# usage: kvm-probe.sh KERNEL
set -euo pipefail

kernel=${1:?usage: kvm-probe.sh KERNEL}
dev=${KNEST_KVM_DEVICE:-/dev/kvm}
limit=${KNEST_KVM_PROBE_SECONDS:-30}

choose() {
	echo "$1"
	echo "accelerator: $1 ($2)" >&2
	exit 0
}

case ${KNEST_ACCEL:-} in
kvm | tcg) choose "$KNEST_ACCEL" "set by KNEST_ACCEL" ;;
"") ;;
*) echo "ERROR: KNEST_ACCEL=$KNEST_ACCEL: want kvm or tcg" >&2; exit 1 ;;
esac
[ -w "$dev" ] || choose tcg "$dev is missing or not writable"

console=$(mktemp)
trap 'rm -f "$console" "$console.qemu"' EXIT
rc=0
# In a subshell whose stderr is dropped: bash's own "Aborted" report of qemu's abort
# is noise here; qemu's output goes to a file.
(timeout --kill-after=5 "$limit" qemu-system-x86_64 -name knest-kvm-probe \
	-machine q35,accel=kvm -cpu max -smp 1 -m 256 -nodefaults -display none -no-reboot \
	-serial "file:$console" -kernel "$kernel" -append "console=ttyS0 panic=-1" \
	</dev/null >"$console.qemu" 2>&1 || exit $?) 2>/dev/null || rc=$?
qemu_said=$(tr -d '\r' <"$console.qemu" | tail -n 1)
if grep -aq 'Unable to mount root fs' "$console"; then
	choose kvm "a kernel booted under KVM"
elif ((rc == 124 || rc == 137)); then
	choose tcg "$dev is there, but a kernel did not boot under KVM within ${limit} s; last console line: $(tr -d '\r' <"$console" | grep -a . | tail -n 1)"
else
	choose tcg "$dev is there, but qemu with KVM exited with status $rc: $qemu_said"
fi
