#!/usr/bin/env bash
# Builds KubeVirt's container images and its operator manifest offline, for
# `make e2e` (hack/kubevirt.mk, target kubevirt-images):
#
#   - binaries from the kubevirt.io/kubevirt module at KUBEVIRT_VERSION (tools module
#     hack/tools/kubevirt; already built into $KUBEVIRT_DIR/bin by make), container-disk
#     compiled from its C source in the module;
#   - the userland of virt-handler and virt-launcher (libvirt 11.3, qemu 10.0, xorriso)
#     from Debian trixie packages (bookworm's libvirt 9.0 is older than KubeVirt v1.7
#     supports), one root filesystem for both, as KubeVirt's images share theirs;
#   - KubeVirt's own files (qemu.conf, virtqemud.conf, the qemu hook, node-labeller.sh,
#     nsswitch.conf) copied from the module, and its users (qemu 107, nonroot 1001);
#   - one OCI archive, $KUBEVIRT_IMAGES_DIR/kubevirt-images.tar, written by
#     images/tools' ociimage (no container engine), images named
#     knest.local/kubevirt/<component>:<version>;
#   - $KUBEVIRT_IMAGES_DIR/kubevirt-operator.yaml from KubeVirt's release template by
#     its manifest-templator, pointing virt-operator at those images.
#
# What KubeVirt's images have and these do not: the file capability
# cap_net_bind_service on qemu (only passt's binding, which knest does not use, binds
# low ports as the non-root qemu user), and SELinux policy. Where the kernel has no
# dummy network driver, virt-handler is the eth0-bridge build
# (VIRT_HANDLER_VARIANT=eth0-bridge, hack/kubevirt-handler-bridge.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dir=${KUBEVIRT_DIR:?}
version=${KUBEVIRT_VERSION:?}
GO=${GO:-go}
prefix=${KUBEVIRT_IMAGE_PREFIX:-knest.local/kubevirt}
suite=trixie
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=libvirt-daemon,libvirt-daemon-driver-qemu,libvirt-daemon-log,libvirt-clients,qemu-system-x86,qemu-utils,xorriso,seabios,ipxe-qemu,qemu-system-data,procps,iproute2,nftables,iptables,util-linux,ca-certificates,findutils
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

tools=$here/hack/tools/kubevirt
mod=$(cd "$tools" && $GO list -m -f '{{.Dir}}' kubevirt.io/kubevirt)
bin=$dir/bin
# Which virt-handler goes into its image: upstream's, or eth0-bridge's where the
# kernel has no dummy network driver (hack/kubevirt-handler-bridge.sh); the image
# says which in /usr/share/knest/virt-handler.
handler_variant=${VIRT_HANDLER_VARIANT:-upstream}
case $handler_variant in
upstream) handler=$bin/virt-handler ;;
eth0-bridge) handler=$bin/virt-handler-eth0-bridge ;;
*) echo "ERROR: VIRT_HANDLER_VARIANT=$handler_variant: upstream or eth0-bridge" >&2; exit 1 ;;
esac
[ -x "$handler" ] || { echo "ERROR: $handler missing (make kubevirt-images builds it)" >&2; exit 1; }
out=${KUBEVIRT_IMAGES_DIR:-$dir/images/$handler_variant}
for b in virt-operator virt-api virt-controller virt-chroot virt-launcher virt-launcher-monitor virt-probe virt-tail virt-freezer; do
	[ -x "$bin/$b" ] || { echo "ERROR: $bin/$b missing (make kubevirt-images builds it)" >&2; exit 1; }
done

# --- userland (cached by its package list) -------------------------------------------
userland=$dir/userland/$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-16)
if [ ! -f "$userland/rootfs.tar" ]; then
	log "Debian $suite userland for virt-handler and virt-launcher (mmdebstrap)"
	rm -rf "$userland.tmp" && mkdir -p "$userland.tmp"
	mmdebstrap --mode=root --variant=minbase --include="$packages" \
		--aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='chroot "$1" dpkg-query -W -f="\${Package}=\${Version}\n" > "$1/packages.lock"' \
		--customize-hook="cp \"\$1/packages.lock\" '$userland.tmp/packages.lock'; rm \"\$1/packages.lock\"" \
		--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' --skip=output/dev \
		"$suite" "$userland.tmp/rootfs.tar" "$mirror"
	rm -rf "$userland" && mv "$userland.tmp" "$userland"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- KubeVirt's files ---------------------------------------------------------------
log "container-disk (C, static)"
gcc -static -O2 -o "$tmp/container-disk" "$mod/cmd/container-disk-v2alpha/main.c"
f=$tmp/files
mkdir -p "$f"
tar -xOf "$userland/rootfs.tar" ./etc/passwd >"$f/passwd"
tar -xOf "$userland/rootfs.tar" ./etc/group >"$f/group"
printf 'qemu:x:107:107:qemu user:/home/qemu:/bin/bash\nnonroot-user:x:1001:1001::/home/nonroot-user:/bin/bash\n' >>"$f/passwd"
printf 'qemu:x:107:\nnonroot-user:x:1001:\n' >>"$f/group"
echo "$version" >"$f/.version"
# Debian builds libvirt's monolithic daemon only (libvirtd, no virtqemud). KubeVirt
# starts /usr/sbin/virtqemud and, as non-root, connects to
# $XDG_RUNTIME_DIR/libvirt/virtqemud-sock; libvirtd serves the same QEMU driver with
# the same options on libvirt-sock beside it (as root, qemu:///system finds that
# socket itself).
cat >"$f/virtqemud" <<'SH'
#!/bin/sh
dir=${XDG_RUNTIME_DIR:-/var/run}/libvirt
[ "$(id -u)" = 0 ] && dir=/var/run/libvirt
mkdir -p "$dir" && ln -sfn libvirt-sock "$dir/virtqemud-sock"
exec /usr/sbin/libvirtd "$@"
SH
# The static images (operator, api, controller): these users, /.version and a /tmp
# (sticky, which a files layer cannot express, so a tarball).
s=$tmp/static
mkdir -p "$s/etc" "$s/tmp"
chmod 1777 "$s/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnonroot-user:x:1001:1001::/home/nonroot-user:/bin/sh\n' >"$s/etc/passwd"
printf 'root:x:0:\nnonroot-user:x:1001:\n' >"$s/etc/group"
cp "$f/.version" "$s/.version"
tar --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -cf "$f/static.tar" -C "$s" .

img() { # name, user, entrypoint, layers...
	local name=$1 user=$2 entry=$3
	shift 3
	local IFS=,
	printf '{"ref": "%s/%s:%s", "user": "%s", "entrypoint": ["%s"], "layers": [%s]}' "$prefix" "$name" "$version" "$user" "$entry" "$*"
}
file() { printf '{"src": "%s", "dst": "%s", "mode": "%s"}' "$1" "$2" "${3:-0755}"; }
static_base=$(printf '{"tarball": "%s"}' "$f/static.tar")
userland_layer=$(printf '{"tarball": "%s"}' "$userland/rootfs.tar")
users_layer=$(printf '{"files": [%s, %s, %s, %s]}' "$(file "$f/passwd" /etc/passwd 0644)" "$(file "$f/group" /etc/group 0644)" \
	"$(file "$mod/cmd/virt-launcher/nsswitch.conf" /etc/nsswitch.conf 0644)" "$(file "$f/.version" /.version 0644)")
# virt-launcher-monitor starts virt-launcher with CAP_NET_BIND_SERVICE as an ambient
# capability, which the kernel refuses (EPERM) unless the monitor's file has it: the
# file capability KubeVirt's image sets, kept as an xattr in a tarball layer.
l=$tmp/launcher
mkdir -p "$l/usr/bin" "$l/usr/sbin" "$l/etc/libvirt/hooks" "$l/var"
# virt-handler writes the launcher's DHCP cache under var/run in the launcher's root
# as /proc/PID/root shows it, where Debian's absolute /var/run -> /run would resolve in
# virt-handler's own root, and virt-launcher would then find no cache ("open
# ...var/run/kubevirt-private/vif-cache-eth0.json: no such file"). KubeVirt's own
# images have the link relative.
ln -s ../run "$l/var/run"
for b in virt-launcher virt-launcher-monitor virt-probe virt-tail virt-freezer; do install -m 0755 "$bin/$b" "$l/usr/bin/"; done
install -m 0755 "$tmp/container-disk" "$mod/cmd/virt-launcher/node-labeller/node-labeller.sh" "$l/usr/bin/"
install -m 0755 "$f/virtqemud" "$l/usr/sbin/virtqemud"
install -m 0644 "$mod/cmd/virt-launcher/qemu.conf" "$mod/cmd/virt-launcher/virtqemud.conf" "$l/etc/libvirt/"
install -m 0755 "$mod/cmd/virt-launcher/qemu" "$l/etc/libvirt/hooks/qemu"
setcap cap_net_bind_service=+ep "$l/usr/bin/virt-launcher-monitor"
tar --xattrs --xattrs-include='security.capability' --pax-option=delete=atime,delete=ctime --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name \
	-cf "$f/launcher.tar" -C "$l" .
launcher_layer=$(printf '{"tarball": "%s"}' "$f/launcher.tar")
echo "$handler_variant" >"$f/virt-handler-variant"
handler_layer=$(printf '{"files": [%s, %s, %s, %s]}' "$(file "$handler" /usr/bin/virt-handler)" \
	"$(file "$bin/virt-chroot" /usr/bin/virt-chroot)" "$(file "$tmp/container-disk" /usr/bin/container-disk)" \
	"$(file "$f/virt-handler-variant" /usr/share/knest/virt-handler 0644)")
one() { printf '{"files": [%s]}' "$(file "$bin/$1" "/usr/bin/$1")"; }
cat >"$tmp/spec.json" <<EOF
{"images": [
 $(img virt-operator 1001 /usr/bin/virt-operator "$static_base" "$(one virt-operator)"),
 $(img virt-api 1001 /usr/bin/virt-api "$static_base" "$(one virt-api)"),
 $(img virt-controller 1001 /usr/bin/virt-controller "$static_base" "$(one virt-controller)"),
 $(img virt-handler 0 /usr/bin/virt-handler "$userland_layer" "$users_layer" "$handler_layer"),
 $(img virt-launcher 0 /usr/bin/virt-launcher "$userland_layer" "$users_layer" "$launcher_layer")
]}
EOF

log "writing the image archive"
mkdir -p "$out.tmp"
(cd "$here/images/tools" && $GO run ./cmd/ociimage containers -spec "$tmp/spec.json" -out "$out.tmp/kubevirt-images.tar")
cp "$userland/packages.lock" "$out.tmp/packages.lock"
cp "$f/virt-handler-variant" "$out.tmp/virt-handler"

# --- operator manifest (KubeVirt's hack/build-manifests.sh, for this one file) -------
log "kubevirt-operator.yaml"
(cd "$tools" && $GO tool manifest-templator --process-files --generated-manifests-dir="$mod/manifests/generated/" \
	--input-file="$mod/manifests/release/kubevirt-operator.yaml.in" >"$tmp/operator.yaml.in")
(cd "$tools" && $GO tool manifest-templator --process-vars --namespace=kubevirt --container-prefix="$prefix" \
	--container-tag="$version" --image-pull-policy=IfNotPresent --verbosity=2 --kubevirt-logo-path=/dev/null \
	--input-file="$tmp/operator.yaml.in" >"$out.tmp/kubevirt-operator.yaml")
grep -q "image: $prefix/virt-operator:$version" "$out.tmp/kubevirt-operator.yaml" ||
	{ echo "ERROR: kubevirt-operator.yaml does not run $prefix/virt-operator:$version" >&2; exit 1; }
rm -rf "$out" && mv "$out.tmp" "$out"
log "KubeVirt images ($handler_variant virt-handler): $out"
ls -l "$out" >&2
