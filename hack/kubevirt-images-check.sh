#!/usr/bin/env bash
# Smoke checks of KubeVirt's images without a cluster (make kubevirt-images-check):
# loads $KUBEVIRT_IMAGES_DIR/kubevirt-images.tar into a podman of its own (storage
# under $KUBEVIRT_DIR/check; a kind cluster's podman is left alone) and, in the images:
#   - every binary's shared libraries resolve; qemu, libvirt and virtlogd run;
#   - node-labeller.sh runs as virt-handler's init container runs it (privileged:
#     virtqemud -d, virsh domcapabilities, hypervisor-cpu-baseline, capabilities);
#   - a libvirt domain runs under TCG as root (qemu:///system, qemu as user qemu);
#   - virt-launcher-monitor and virt-launcher run as a VMI's pod runs them by default
#     (uid 107 with containerd's capabilities), start virtqemud and virtlogd and
#     connect; a TCG domain then runs on that virtqemud (virt-launcher's non-root URI);
#   - virt-operator, virt-api, virt-controller and virt-handler start up to where they
#     need a cluster.
# Then the Go test of the operator manifest (hack/tools/kubevirt/manifests).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dir=${KUBEVIRT_DIR:?}
version=${KUBEVIRT_VERSION:?}
GO=${GO:-go}
prefix=${KUBEVIRT_IMAGE_PREFIX:-knest.local/kubevirt}
archive=${KUBEVIRT_IMAGES_DIR:?}/kubevirt-images.tar
check=$dir/check
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v podman >/dev/null || fail "podman not found (apt-get install -y podman runc)"
command -v jq >/dev/null || fail "jq not found"
[ -f "$archive" ] || fail "$archive missing (make kubevirt-images)"
mkdir -p "$check"
# As DESIGN.md: crun refuses this kind of host's hybrid cgroup layout, and podman's
# default nofile ulimit exceeds what such a host allows. Nothing shared with the host's
# podman (a kind cluster's): not its storage, not its per-boot tmp_dir (/run/libpod,
# whose loss makes podman reset the state of every container it runs), not its shm
# locks.
run_dir=/run/knest-kubevirt-check
export CONTAINERS_CONF=$check/containers.conf
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ntmp_dir = "%s/tmp"\nlock_type = "file"\n' \
	"$run_dir" >"$CONTAINERS_CONF"
podman() { command podman --root "$check/storage" --runroot "$run_dir/run" "$@"; }

# podman 4.3 loads no OCI archive holding several images ("more than one image in
# oci, choose an image"), and their ref.name annotations (the tag alone) do not tell
# them apart: one layout per image, sharing the blobs.
log "loading $archive into $check/storage"
rm -rf "$check/layout" && mkdir -p "$check/layout/all"
tar -xf "$archive" -C "$check/layout/all"
n=$(jq '.manifests | length' "$check/layout/all/index.json")
for i in $(seq 0 $((n - 1))); do
	m=$(jq -c ".manifests[$i]" "$check/layout/all/index.json")
	ref=$(jq -r '.annotations["io.containerd.image.name"]' <<<"$m")
	# Relative: podman names the image after the path, and .cache is no valid name.
	d=layout/image$i
	mkdir -p "$check/$d" && ln -s ../all/blobs "$check/$d/blobs" && cp "$check/layout/all/oci-layout" "$check/$d/"
	jq -n --argjson m "$m" '{schemaVersion: 2, manifests: [$m]}' >"$check/$d/index.json"
	id=$(cd "$check" && podman pull -q "oci:$d")
	podman untag "$id"
	podman tag "$id" "$ref"
	echo "  $ref $(podman image inspect --format '{{.Size}}' "$id" | numfmt --to=si)B" >&2
done
rm -rf "$check/layout"
img() { echo "$prefix/$1:$version"; }
for c in virt-operator virt-api virt-controller virt-handler virt-launcher; do
	podman image exists "$(img "$c")" || fail "$(img "$c") not in the archive"
done
run() { podman run --rm --network none "$@"; }

log "shared libraries and versions"
run --entrypoint /bin/sh "$(img virt-launcher)" -ec '
	for b in /usr/bin/virt-launcher /usr/bin/virt-launcher-monitor /usr/bin/virt-probe /usr/bin/virt-tail \
		/usr/bin/virt-freezer /usr/sbin/libvirtd /usr/sbin/virtlogd /usr/bin/qemu-system-x86_64 /usr/bin/qemu-img /usr/bin/virsh; do
		if ldd "$b" 2>&1 | grep "not found"; then echo "$b: unresolved libraries" >&2; exit 1; fi
	done
	ldd /usr/bin/virt-launcher | grep -q "libvirt.so.0 => /"
	# It runs in the containerDisk images, which have no libc.
	! ldd /usr/bin/container-disk >/dev/null 2>&1
	qemu-system-x86_64 --version | head -1
	qemu-img --version | head -1
	/usr/sbin/virtqemud --version
	/usr/sbin/virtlogd --version
	test "$(id -u qemu):$(id -g qemu)" = 107:107
	test -x /usr/bin/container-disk && test -x /usr/bin/node-labeller.sh && test -x /etc/libvirt/hooks/qemu
	grep -q "^user = \"qemu\"" /etc/libvirt/qemu.conf
	test -f /usr/share/seabios/bios-256k.bin && test -f /usr/share/qemu/kvmvapic.bin
	/usr/bin/virt-launcher --help 2>&1 | grep -q -- --qemu-timeout'
run --entrypoint /bin/sh "$(img virt-handler)" -ec '
	for b in /usr/bin/virt-handler /usr/bin/virt-chroot; do
		if ldd "$b" 2>&1 | grep "not found"; then echo "$b: unresolved libraries" >&2; exit 1; fi
	done
	virt-chroot --help >/dev/null
	command -v qemu-img nft iptables findmnt xorriso >/dev/null'

log "node-labeller.sh (virt-handler's init container, privileged)"
run --user 0 --privileged --entrypoint /bin/sh "$(img virt-launcher)" -ec '
	mkdir -p /var/lib/kubevirt-node-labeller
	node-labeller.sh >/tmp/out 2>&1 || { cat /tmp/out; exit 1; }
	grep -q "<domainCapabilities>" /var/lib/kubevirt-node-labeller/virsh_domcapabilities.xml
	grep -q "<model" /var/lib/kubevirt-node-labeller/supported_features.xml
	grep -q "<capabilities>" /var/lib/kubevirt-node-labeller/capabilities.xml
	echo "  domcapabilities: $(grep -o "<domain>[a-z]*</domain>" /var/lib/kubevirt-node-labeller/virsh_domcapabilities.xml)"'

# A domain with no disk: seabios runs and finds nothing to boot, qemu keeps running.
domain='<domain type="qemu"><name>smoke</name><memory unit="MiB">64</memory><vcpu>1</vcpu>
<os><type arch="x86_64" machine="q35">hvm</type></os><devices><console type="pty"/></devices></domain>'
boot='
	echo "$DOMAIN" >/tmp/smoke.xml
	virsh -q -c "$URI" create /tmp/smoke.xml >/dev/null
	sleep 2
	state=$(virsh -q -c "$URI" domstate smoke)
	echo "  $(id -un): smoke domain $state, qemu as $(ps -o user= -C qemu-system-x86_64)"
	test "$state" = running
	virsh -q -c "$URI" destroy smoke >/dev/null'
log "a TCG domain as root (qemu:///system)"
run --user 0 -e DOMAIN="$domain" -e URI=qemu:///system --entrypoint /bin/sh "$(img virt-launcher)" -ec '
	virtlogd -d -f /etc/libvirt/virtlogd.conf
	virtqemud -f /etc/libvirt/virtqemud.conf 2>/tmp/virtqemud.log &
	for i in $(seq 50); do [ -S /run/libvirt/libvirt-sock ] && break; sleep 0.2; done
	'"$boot"' || { cat /tmp/virtqemud.log; exit 1; }'
# As a VMI's pod runs it by default: uid 107, and the capabilities containerd gives a
# non-root container with NET_BIND_SERVICE added (bounding set only, none ambient or
# inheritable, which podman would add), so virt-launcher-monitor's start of
# virt-launcher with that ambient capability needs the monitor's file capability.
# virt-launcher then starts virtqemud and virtlogd and connects (non-root URI).
log "virt-launcher as a VMI's pod runs it (uid 107, containerd's capabilities), then a TCG domain on its virtqemud"
mounts=()
for d in kubevirt-private libvirt kubevirt kubevirt-ephemeral-disks; do
	mounts+=(--mount "type=tmpfs,destination=/run/$d,tmpfs-mode=1777")
done
run --user 0 "${mounts[@]}" -e DOMAIN="$domain" -e BOOT="$boot" -e URI='qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock' \
	-e XDG_RUNTIME_DIR=/var/run -e XDG_CONFIG_HOME=/var/run/kubevirt-private -e XDG_CACHE_HOME=/var/run/kubevirt-private \
	--entrypoint /bin/sh "$(img virt-launcher)" -ec '
	as107() { setpriv --reuid=107 --regid=107 --clear-groups --inh-caps=-all --ambient-caps=-all --bounding-set=-all,+net_bind_service "$@"; }
	as107 virt-launcher-monitor --qemu-timeout 60s --uid smoke --name smoke --namespace default --run-as-nonroot \
		--kubevirt-share-dir /var/run/kubevirt --ephemeral-disk-dir /var/run/kubevirt-ephemeral-disks \
		--container-disk-dir /var/run/kubevirt/container-disks --hook-sidecars 0 >/tmp/launcher.log 2>&1 &
	for i in $(seq 100); do grep -q "Marked as ready" /tmp/launcher.log && break; sleep 0.2; done
	grep -q "Marked as ready" /tmp/launcher.log || { cat /tmp/launcher.log; exit 1; }
	echo "  virt-launcher: $(grep -o "Connected to libvirt daemon" /tmp/launcher.log), ambient capabilities $(grep CapAmb /proc/$(pgrep -x virt-launcher)/status | cut -f2)"
	as107 /bin/sh -ec "$BOOT" || { cat /tmp/launcher.log; exit 1; }'

log "control plane binaries up to the cluster"
expect() { # image, pattern, podman run options [-- command arguments]
	local image=$1 pattern=$2 out opts=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	out=$(run "${opts[@]}" "$(img "$image")" "$@" 2>&1 || true)
	grep -q -- "$pattern" <<<"$out" || fail "$image: no \"$pattern\" in: $(tail -5 <<<"$out")"
	echo "  $image: $(grep -m1 -o -- "$pattern.\{0,60\}" <<<"$out")" >&2
}
expect virt-operator 'KUBERNETES_SERVICE_HOST' -e VIRT_OPERATOR_IMAGE="$(img virt-operator)" -e KUBEVIRT_VERSION="$version"
expect virt-api 'KUBERNETES_SERVICE_HOST'
expect virt-controller 'KUBERNETES_SERVICE_HOST'
expect virt-handler 'KUBERNETES_SERVICE_HOST' --entrypoint /bin/sh -- -c 'exec virt-handler --pod-ip-address 10.0.0.1'

log "operator manifest (go test)"
(cd "$here/hack/tools/kubevirt" && KNEST_KUBEVIRT=$dir $GO test -count=1 ./manifests/ 2>&1 | grep -v '^{')
# The images are a copy of the archive: dropped once the checks pass (kept for a look
# after a failure). Not podman system reset: it deletes tmp_dir whichever it is.
podman rmi --all --force >/dev/null
log "kubevirt-images-check: all passed"
