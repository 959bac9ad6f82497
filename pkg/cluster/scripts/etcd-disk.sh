#!/bin/sh
# knest-etcd-disk: mounts a control plane's etcd disk (attached by knest's etcd-disk
# controller, virtio serial "etcd") on /var/lib/etcd before kubeadm runs, as a
# preKubeadmCommand. The disk is formatted only when it has no file system, so a VM
# that KubeVirt restarted from a fresh root disk finds the cluster's data and
# `kubeadm init` renders the control plane around it. (cloud-init's fs_setup formats
# a whole disk on every first boot of an instance, and a restarted VM is one.) The
# fstab line mounts it again after a reboot of the guest, where cloud-init does not
# run again.
set -eu
dev=/dev/disk/by-id/virtio-etcd
label=knest-etcd
i=0
until [ -b "$dev" ]; do
	i=$((i + 1))
	if [ "$i" -gt 120 ]; then
		echo "knest-etcd-disk: $dev did not appear; etcd stays on the root disk" >&2
		exit 1
	fi
	sleep 1
done
# A disk that knest's restore Job wrote (pkg/backup.WriteDiskImage) holds a tar of
# the restored data directory instead of a file system: unpack it, make the file
# system, and put the data on it.
restore=
if [ "$(tar -tf "$dev" 2>/dev/null | head -n 1)" = "knest-etcd-restore/" ]; then
	restore=/var/lib/knest-etcd-restore
	rm -rf "$restore"
	mkdir -p "$restore"
	tar -xf "$dev" -C "$restore"
	wipefs -a -q "$dev"
	mkfs.ext4 -q -L "$label" "$dev"
elif ! blkid "$dev" >/dev/null 2>&1; then
	mkfs.ext4 -q -L "$label" "$dev"
fi
grep -q "^LABEL=$label " /etc/fstab || echo "LABEL=$label /var/lib/etcd ext4 defaults,nofail 0 2" >>/etc/fstab
mkdir -p /var/lib/etcd
mountpoint -q /var/lib/etcd || mount "$dev" /var/lib/etcd
# A member that joined an existing etcd (not the first control plane) and whose VM
# restarted joins again as a new member, as it did before it had a disk of its own:
# its old identity must not start beside the new one. The first control plane keeps
# its data; without it `kubeadm init` would make a new, empty cluster.
if [ -n "$restore" ]; then
	rm -rf /var/lib/etcd/member
	mv "$restore/knest-etcd-restore/member" /var/lib/etcd/member
	rm -rf "$restore"
	echo "knest-etcd-disk: restored etcd's data from a snapshot"
elif [ -f /run/kubeadm/kubeadm-join-config.yaml ]; then
	rm -rf /var/lib/etcd/member
fi
echo "knest-etcd-disk: $dev on /var/lib/etcd: $(ls /var/lib/etcd | tr '\n' ' ')"
