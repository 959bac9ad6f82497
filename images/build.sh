#!/usr/bin/env bash
# Builds the knest node image for one Kubernetes version, offline (Debian packages and
# the Go module proxy only), with every step cached by its inputs under $KNEST_CACHE:
#
#   base/<hash>/       Debian root filesystem tarball, kernel, initrd   (packages only)
#   kube/<version>/    kubelet, kubeadm, kubectl and the control-plane binaries
#   bin/<name>-<ver>/  containerd, runc, etcd, coredns, flanneld, the flannel CNI plugin,
#                      konnectivity, agnhost (Kubernetes' e2e test image, for knest's
#                      e2e suite)
#   bin/knest-csi/<digest>/  knest's CSI driver (cmd/knest-csi), built from this checkout
#   images/<hash>/     images.tar: the preloaded container images (OCI archive)
#   hosted/<hash>/     hosted-images.tar: the images of a hosted control plane (OCI archive)
#   disk/<version>-<hash>/  disk.raw as assembled, images not yet imported
#   out/<version>-<hash>/  disk.raw (images imported by one boot under qemu, see
#                      scripts/bake.sh), disk.qcow2, vmlinuz, initrd.img, manifest.json,
#                      bake.log, node-containerdisk.tar, node-kernel.tar (OCI archives),
#                      hosted-images.tar (a link to hosted/<hash>/hosted-images.tar)
#   out/<version>      symlink to the newest complete output of that version
#
# A step writes to a .tmp path and renames it when complete, so an interrupted build
# never leaves an output that a later build takes as finished. Outputs are never
# rewritten: a changed input makes a new out/<version>-<hash>, the symlink moves, and
# the version's older disk/ and out/ are removed (KNEST_NODE_IMAGE_KEEP_OLD=true keeps
# them for a VM still running from an older disk as its qcow2 backing file).
#
# KNEST_NODE_IMAGE_BAKE=false skips the boot under qemu (no qemu-system-x86_64
# needed); the image then imports its images at every boot.
#
# usage: KNEST_CACHE=... KUBE_VERSION=v1.34.3 images/build.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${KNEST_CACHE:?KNEST_CACHE must be set}/node-image
version=${KUBE_VERSION:?KUBE_VERSION must be set (e.g. v1.34.3)}
GO=${GO:-go}
export GO
# Kubernetes minors the pinned Cluster API release (v1.13) supports for workload
# clusters, per its book (docs/book/src/reference/versions.md).
min_minor=${KNEST_MIN_MINOR:-30}
max_minor=${KNEST_MAX_MINOR:-35}
min_free_gib=${KNEST_MIN_FREE_GIB:-15}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# --- preflight: fail before any work with a message saying what to do -------------
if ! [[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
	die "KUBE_VERSION=$version is not of the form v1.MINOR.PATCH (e.g. v1.34.3)"
fi
minor=${BASH_REMATCH[1]}
if ((minor < min_minor || minor > max_minor)); then
	die "Kubernetes $version is not supported: the node image supports v1.$min_minor.x to v1.$max_minor.x (what Cluster API v1.13 supports for workload clusters, and knest builds node images for)"
fi
bake=${KNEST_NODE_IMAGE_BAKE:-true}
case $bake in true | false) ;; *) die "KNEST_NODE_IMAGE_BAKE=$bake: want true or false" ;; esac
needed=(mmdebstrap mkfs.ext4 qemu-img tar sha256sum "$GO")
[ "$bake" = false ] || needed+=(qemu-system-x86_64 e2fsck debugfs timeout)
missing=()
for tool in "${needed[@]}"; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
	die "missing tools: ${missing[*]}; on Debian: apt-get install mmdebstrap e2fsprogs qemu-utils qemu-system-x86 (and Go from go.dev)"
fi
[ "$(id -u)" = 0 ] || die "the node image build runs as root (mmdebstrap --mode=root, file ownership in the disk image)"
mkdir -p "$cache"

# check_free_space fails before the first step that builds anything; a build whose
# every step is cached needs no space.
space_checked=false
check_free_space() {
	[ "$space_checked" = false ] || return 0
	space_checked=true
	local free_gib=$(($(df --output=avail -k "$cache" | tail -1) / 1024 / 1024))
	if ((free_gib < min_free_gib)); then
		die "only ${free_gib} GiB free under $cache; the build needs about ${min_free_gib} GiB (free space or set KNEST_CACHE elsewhere)"
	fi
}

# prune_older DIR: removes the outputs of DIR's version that DIR replaced
# (DIR is <parent>/<version>-<hash>), so that every change of an input does not leave
# gigabytes behind. KNEST_NODE_IMAGE_KEEP_OLD=true keeps them.
prune_older() {
	local keep=$1 old
	[ "${KNEST_NODE_IMAGE_KEEP_OLD:-false}" != true ] || return 0
	for old in "${keep%-*}"-*; do
		[ -d "$old" ] && [ "$old" != "$keep" ] && [[ $old != *.tmp ]] || continue
		log "removing the replaced $old"
		rm -rf "$old"
	done
}

# hash_inputs prints a short digest of files and strings.
hash_inputs() {
	local x
	for x in "$@"; do
		if [ -d "$x" ]; then
			(cd "$x" && find . -print0 | LC_ALL=C sort -z | xargs -0 -r sh -c 'for f; do if [ -L "$f" ]; then echo "L $f $(readlink "$f")"; elif [ -f "$f" ]; then echo "F $f $(stat -c %a "$f") $(sha256sum <"$f")"; else echo "D $f"; fi; done' _)
		elif [ -f "$x" ]; then
			echo "F $(sha256sum <"$x")"
		else
			echo "S $x"
		fi
	done | sha256sum | cut -c1-16
}

# step DIR CMD...: runs CMD with $tmp set to DIR.tmp unless DIR exists, then renames.
step() {
	local dir=$1
	shift
	if [ -e "$dir" ]; then
		return 0
	fi
	check_free_space
	tmp=$dir.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# A subshell outside any condition, so that errexit holds inside the step.
	local rc=0
	set +e
	(
		set -e
		"$@"
	)
	rc=$?
	set -e
	if ((rc != 0)); then
		rm -rf "$tmp"
		die "step $(basename "$dir") failed"
	fi
	mv "$tmp" "$dir"
}

# --- 1. base root filesystem ---------------------------------------------------------
base_hash=$(hash_inputs "$here/rootfs/packages.txt" "$here/scripts/build-rootfs.sh" "${DEBIAN_SUITE:-bookworm}")
base=$cache/base/$base_hash
build_base() {
	log "building the Debian root filesystem (mmdebstrap, several minutes)"
	"$here/scripts/build-rootfs.sh" "$tmp"
}
step "$base" build_base
log "base root filesystem: $base"

# --- 2. Kubernetes binaries ----------------------------------------------------------
kube=$cache/kube/$version
kube_bins=(kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
log "Kubernetes $version binaries (built from k8s.io/kubernetes; about 15 minutes the first time)"
KUBE_REUSE_DIR=${KNEST_CACHE}/testbin/$version "$here/scripts/build-kube.sh" "$version" "$cache/kube-mod/$version" "$kube" "${kube_bins[@]}"

# --- 3. image references -------------------------------------------------------------
mapfile -t kubeadm_images < <("$kube/kubeadm" config images list --kubernetes-version "$version")
image_ref() {
	local i
	for i in "${kubeadm_images[@]}"; do
		case $i in */"$1":*) echo "$i"; return ;; esac
	done
	die "kubeadm $version lists no $1 image (got: ${kubeadm_images[*]})"
}
etcd_ref=$(image_ref etcd)
# A hosted control plane's etcd runs the image of pkg/hosted's table for the minor;
# this node image preloads what kubeadm lists, so the two must agree.
hosted_etcd=$(sed -n 's/^\s*'"$minor"': "\([^"]*\)",.*$/\1/p' "$repo/pkg/hosted/etcd.go")
[ "registry.k8s.io/etcd:$hosted_etcd" = "$etcd_ref" ] ||
	die "kubeadm $version lists $etcd_ref, pkg/hosted/etcd.go's etcdImageTags has ${hosted_etcd:-nothing} for minor $minor: update the table"
coredns_ref=$(image_ref coredns)
pause_ref=$(image_ref pause)
flannel_const() { sed -n 's/^\s*'"$1"'\s*=\s*"\(.*\)"$/\1/p' "$repo/pkg/cluster/flannel.go"; }
flannel_ref=$(flannel_const FlannelImage)
flannel_cni_ref=$(flannel_const FlannelCNIPluginImage)
[ -n "$flannel_ref" ] && [ -n "$flannel_cni_ref" ] || die "cannot read the flannel image constants from pkg/cluster/flannel.go"
tag() { echo "${1##*:}"; }
etcd_version=v$(tag "$etcd_ref" | sed 's/-[0-9]*$//')
coredns_version=$(tag "$coredns_ref")
# CoreDNS of every minor knest has node images for (pkg/cluster/coredns.go), not only
# this kubeadm's: during an upgrade Cluster API moves CoreDNS last, so a new node's
# `kubeadm join` pulls the old minor's CoreDNS and its pods may land on new nodes;
# nodes of a held pool meet the new minor's. Air-gapped, only preloaded images run.
mapfile -t coredns_versions < <({
	echo "$coredns_version"
	sed -n 's/^\s*coreDNSv1[0-9]*\s*=\s*"\(v[0-9.]*\)".*/\1/p' "$repo/pkg/cluster/coredns.go"
} | sort -u)
flannel_version=$(tag "$flannel_ref")
# Hosted control planes (the control plane as pods on the host cluster) use these
# references, and kube-apiserver, kube-controller-manager, kube-scheduler, etcd and
# pause as kubeadm lists them; the controller names them alike. The konnectivity
# images are upstream's (binary at /, entrypoint it, uid 65532 as distroless:nonroot).
konnectivity_version=v0.33.0
proxy_server_ref=registry.k8s.io/kas-network-proxy/proxy-server:$konnectivity_version
proxy_agent_ref=registry.k8s.io/kas-network-proxy/proxy-agent:$konnectivity_version
kubeadm_ref=knest.local/kubeadm:$version
# Kubernetes' own e2e test image (its webhook subcommand is the e2e suite's tenant
# admission webhook); test-only, preloaded because a tenant node pulls nothing.
agnhost_ref=knest.local/agnhost:$version
# knest's CSI driver (cmd/knest-csi): its node plugin runs on every tenant node, from
# the image the controller renders (pkg/csi/deploy.DefaultImage, read here).
knest_csi_ref=$(sed -n 's/^\s*DefaultImage\s*=\s*"\(.*\)"$/\1/p' "$repo/pkg/csi/deploy/deploy.go")
[ -n "$knest_csi_ref" ] || die "cannot read DefaultImage from pkg/csi/deploy/deploy.go"
# The flannel CNI plugin's own repository is not served by the Go module proxy; the
# plugin lived in containernetworking/plugins until v0.9.1, which is what we build.
flannel_cni_version=${FLANNEL_CNI_VERSION:-v0.9.1}

# --- 4. component binaries -----------------------------------------------------------
bin=$cache/bin
# The container runtime, built from its Go modules: containerd 2.3, the LTS line
# (supported until 2028-04-30 by containerd's RELEASES.md; kind v0.33 ships it too), and
# the runc that release pins and tests (its script/setup/runc-version). Debian
# bookworm's containerd 1.6 is out of support since 2025-08-23, and the kubelet's
# fallback for runtimes that do not implement the RuntimeConfig call (containerd before
# 2.0) is going away (KEP-4033). CGO off for containerd (no btrfs snapshotter, which
# the node does not use); runc with cgo and libseccomp linked statically, as runc's own
# release does (built without libpathrs, which runc still supports).
containerd_version=${CONTAINERD_VERSION:-v2.3.7}
runc_version=${RUNC_VERSION:-v1.5.2}
containerd_bin=$bin/containerd-$containerd_version
runc_bin=$bin/runc-$runc_version/runc
containerd_ldflags="-X github.com/containerd/containerd/v2/version.Version=$containerd_version -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
for c in containerd containerd-shim-runc-v2 ctr; do
	tags=urfave_cli_no_docs
	[ "$c" != containerd-shim-runc-v2 ] || tags+=,no_grpc
	GOTAGS=$tags "$here/scripts/build-gomod.sh" github.com/containerd/containerd/v2 "$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/$c" "$cache/mod/$c-$containerd_version" "$containerd_bin/$c" "$containerd_ldflags"
done
[ -x "$runc_bin" ] || [ -f /usr/include/seccomp.h ] || die "runc links libseccomp: apt-get install libseccomp-dev (make node-image-tools does)"
CGO=1 GOTAGS=seccomp,urfave_cli_no_docs "$here/scripts/build-gomod.sh" github.com/opencontainers/runc "$runc_version" \
	github.com/opencontainers/runc "$cache/mod/runc-$runc_version" "$runc_bin"
"$here/scripts/build-gomod.sh" go.etcd.io/etcd/server/v3 "$etcd_version" go.etcd.io/etcd/server/v3 \
	"$cache/mod/etcd-$etcd_version" "$bin/etcd-$etcd_version/etcd"
for v in "${coredns_versions[@]}"; do
	"$here/scripts/build-gomod.sh" github.com/coredns/coredns "$v" github.com/coredns/coredns \
		"$cache/mod/coredns-$v" "$bin/coredns-$v/coredns"
done
# Two of flanneld's cloud-backend dependencies are not served by the module proxy:
# tencentcloud common at the required version (a newer one is), and the VPC package at
# any version (a compile-only stub in images/stubs; knest runs flannel's VXLAN backend).
GOMOD_EXTRA="replace github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common => github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common v1.3.210
replace github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc => $here/stubs/tencentcloud-vpc" CGO=1 \
"$here/scripts/build-gomod.sh" github.com/flannel-io/flannel "$flannel_version" github.com/flannel-io/flannel \
	"$cache/mod/flannel-$flannel_version" "$bin/flannel-$flannel_version/flanneld" \
	"-X github.com/flannel-io/flannel/pkg/version.Version=$flannel_version"
"$here/scripts/build-gomod.sh" github.com/containernetworking/plugins "$flannel_cni_version" \
	github.com/containernetworking/plugins/plugins/meta/flannel \
	"$cache/mod/cni-plugins-$flannel_cni_version" "$bin/cni-flannel-$flannel_cni_version/flannel"
# konnectivity: the checksum database has no entry for this module (404), so it is
# fetched with GONOSUMDB (go.sum still pins what was fetched). Upstream builds it with
# the konnectivity-client of the same tag (a replace to ./konnectivity-client, which
# does not apply to a dependency), hence the replace to that tag.
for p in server agent; do
	GONOSUMDB=sigs.k8s.io/apiserver-network-proxy \
		GOMOD_EXTRA="replace sigs.k8s.io/apiserver-network-proxy/konnectivity-client => sigs.k8s.io/apiserver-network-proxy/konnectivity-client $konnectivity_version" \
		"$here/scripts/build-gomod.sh" sigs.k8s.io/apiserver-network-proxy "$konnectivity_version" \
		"sigs.k8s.io/apiserver-network-proxy/cmd/$p" "$cache/mod/konnectivity-$p-$konnectivity_version" \
		"$bin/konnectivity-$konnectivity_version/proxy-$p"
done
# agnhost from the same k8s.io/kubernetes module and version as the Kubernetes
# binaries (test/images/agnhost), in the same generated module.
agnhost=$bin/agnhost-$version/agnhost
"$here/scripts/build-kube.sh" "$version" "$cache/kube-mod/$version" "$(dirname "$agnhost")" agnhost
proxy_server=$bin/konnectivity-$konnectivity_version/proxy-server
proxy_agent=$bin/konnectivity-$konnectivity_version/proxy-agent
# knest-csi from this checkout (Go's build cache makes an unchanged one quick), kept
# by its digest: a changed driver is a new file, and a new images step.
log "knest-csi from $repo"
mkdir -p "$bin/knest-csi"
(cd "$repo" && CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$bin/knest-csi/knest-csi.tmp" ./cmd/knest-csi)
knest_csi=$bin/knest-csi/$(sha256sum "$bin/knest-csi/knest-csi.tmp" | cut -c1-12)/knest-csi
if [ -e "$knest_csi" ]; then
	rm "$bin/knest-csi/knest-csi.tmp"
else
	mkdir -p "$(dirname "$knest_csi")" && mv "$bin/knest-csi/knest-csi.tmp" "$knest_csi"
fi
tools_hash=$(hash_inputs "$here/tools/go.mod" "$here/tools/go.sum" "$here/tools/cmd")
tools=$cache/tools/$tools_hash
build_tools() {
	(cd "$here/tools" && CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$tmp/" ./cmd/...)
}
step "$tools" build_tools

# --- 5. preloaded images -------------------------------------------------------------
# Userland some images need (kube-proxy and flanneld call iptables; the flannel
# manifests' init containers call cp; a hosted control plane's kubeadm jobs run shell
# scripts) comes from Debian packages in the base.
utils=$cache/utils/$(hash_inputs "$base_hash" "$here/build.sh")
build_utils() {
	local root=$tmp/rootfs
	mkdir -p "$root" "$tmp/tree"
	tar --numeric-owner -xpf "$base/rootfs.tar" -C "$root"
	local t=$tmp/tree
	mkdir -p "$t/usr/sbin" "$t/usr/bin" "$t/bin" "$t/etc"
	cp -a "$root/usr/sbin/xtables-nft-multi" "$t/usr/sbin/"
	for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		ln -s xtables-nft-multi "$t/usr/sbin/$n"
	done
	cp -a "$root/usr/bin/busybox" "$t/bin/busybox"
	for n in sh cp mv rm ls cat mkdir ln echo sleep base64 sed test [ chmod env head tr; do ln -s busybox "$t/bin/$n"; done
	# The shared libraries xtables-nft-multi and its dlopen()ed extensions link (the
	# statistic match, which kube-proxy uses for Services with several endpoints,
	# needs libm), and the extensions themselves.
	local libs so
	libs=$({
		chroot "$root" /usr/bin/ldd /usr/sbin/xtables-nft-multi
		for so in "$root"/usr/lib/x86_64-linux-gnu/xtables/*.so; do
			chroot "$root" /usr/bin/ldd "${so#"$root"}"
		done
	} | grep -o '/[^ ]*' | sort -u)
	local l
	for l in $libs /lib64/ld-linux-x86-64.so.2; do
		mkdir -p "$t/$(dirname "$l")"
		cp -L "$root/$l" "$t/$l"
	done
	mkdir -p "$t/usr/lib/x86_64-linux-gnu"
	cp -a "$root/usr/lib/x86_64-linux-gnu/xtables" "$t/usr/lib/x86_64-linux-gnu/"
	[ -f "$root/etc/ethertypes" ] && cp "$root/etc/ethertypes" "$t/etc/" || true
	rm -rf "$root"
}
step "$utils" build_utils

coredns_refs=()
coredns_bins=()
for v in "${coredns_versions[@]}"; do
	coredns_refs+=("${coredns_ref%:*}:$v")
	coredns_bins+=("$bin/coredns-$v/coredns")
done
images_hash=$(hash_inputs "${kubeadm_images[*]} ${coredns_refs[*]} $flannel_ref $flannel_cni_ref" "$tools" "$utils" \
	"$kube/kube-apiserver" "$kube/kube-controller-manager" "$kube/kube-scheduler" "$kube/kube-proxy" \
	"$bin/etcd-$etcd_version/etcd" "${coredns_bins[@]}" \
	"$bin/flannel-$flannel_version/flanneld" "$bin/cni-flannel-$flannel_cni_version/flannel" \
	"$proxy_agent_ref" "$proxy_agent" "$agnhost_ref" "$agnhost" "$knest_csi_ref" "$knest_csi")
images=$cache/images/$images_hash
# Spec lines of the images both archives have (the node's and the hosted one), so that
# an image has the same digest in both.
spec_kube() { # component
	printf ' {"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/usr/local/bin/%s", "mode": "0755"}]}]},\n' \
		"$(image_ref "$1")" "$kube/$1" "$1"
}
spec_etcd() {
	printf ' {"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/usr/local/bin/etcd", "mode": "0755"}]}]},\n' \
		"$etcd_ref" "$bin/etcd-$etcd_version/etcd"
}
spec_pause() {
	printf ' {"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/pause", "mode": "0755"}]}], "entrypoint": ["/pause"]},\n' \
		"$pause_ref" "$tools/pause"
}
spec_proxy() { # ref binary: as upstream's images, /<binary> run as distroless:nonroot's uid
	local name
	name=$(basename "$2")
	printf ' {"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/%s", "mode": "0755"}]}], "entrypoint": ["/%s"], "user": "65532"},\n' \
		"$1" "$2" "$name" "$name"
}
build_images() {
	local k=$kube
	cat >"$tmp/spec.json" <<EOF
{"images": [
$(spec_kube kube-apiserver)
$(spec_kube kube-controller-manager)
$(spec_kube kube-scheduler)
 {"ref": "$(image_ref kube-proxy)", "layers": [{"trees": [{"src": "$utils/tree", "dst": "/"}]}, {"files": [{"src": "$k/kube-proxy", "dst": "/usr/local/bin/kube-proxy", "mode": "0755"}]}]},
$(spec_etcd)
$(for i in "${!coredns_refs[@]}"; do
	echo " {\"ref\": \"${coredns_refs[$i]}\", \"layers\": [{\"files\": [{\"src\": \"${coredns_bins[$i]}\", \"dst\": \"/coredns\", \"mode\": \"0755\"}]}], \"entrypoint\": [\"/coredns\"]},"
done)
$(spec_pause)
$(spec_proxy "$proxy_agent_ref" "$proxy_agent")
 {"ref": "$agnhost_ref", "layers": [{"files": [{"src": "$agnhost", "dst": "/agnhost", "mode": "0755"}]}], "entrypoint": ["/agnhost"]},
 {"ref": "$knest_csi_ref", "layers": [{"files": [{"src": "$knest_csi", "dst": "/knest-csi", "mode": "0755"}]}], "entrypoint": ["/knest-csi"]},
 {"ref": "$flannel_ref", "layers": [{"trees": [{"src": "$utils/tree", "dst": "/"}]}, {"files": [{"src": "$bin/flannel-$flannel_version/flanneld", "dst": "/opt/bin/flanneld", "mode": "0755"}]}], "entrypoint": ["/opt/bin/flanneld"]},
 {"ref": "$flannel_cni_ref", "layers": [{"trees": [{"src": "$utils/tree", "dst": "/"}]}, {"files": [{"src": "$bin/cni-flannel-$flannel_cni_version/flannel", "dst": "/flannel", "mode": "0755"}]}]}
]}
EOF
	log "writing the preloaded images archive"
	"$tools/ociimage" containers -spec "$tmp/spec.json" -out "$tmp/images.tar"
	printf '%s\n' "${kubeadm_images[@]}" "${coredns_refs[@]}" "$flannel_ref" "$flannel_cni_ref" "$proxy_agent_ref" "$agnhost_ref" "$knest_csi_ref" |
		awk '!seen[$0]++' >"$tmp/refs.txt"
}
step "$images" build_images

# --- 5b. hosted control-plane images -------------------------------------------------
# What a hosted control plane of this version runs on the host cluster (hack/kind/up.sh
# loads it there): the control plane, etcd, pause, kubeadm (certificates, kubeconfigs
# and uploads in jobs, hence the shell and tools of $utils) and konnectivity's server
# beside kube-apiserver; its agent too, which runs in the tenant and is preloaded there.
hosted_refs=("$(image_ref kube-apiserver)" "$(image_ref kube-controller-manager)" "$(image_ref kube-scheduler)"
	"$etcd_ref" "$pause_ref" "$kubeadm_ref" "$proxy_server_ref" "$proxy_agent_ref")
hosted_hash=$(hash_inputs "${hosted_refs[*]}" "$tools" "$utils" \
	"$kube/kube-apiserver" "$kube/kube-controller-manager" "$kube/kube-scheduler" "$kube/kubeadm" \
	"$bin/etcd-$etcd_version/etcd" "$proxy_server" "$proxy_agent")
hosted=$cache/hosted/$hosted_hash
build_hosted() {
	cat >"$tmp/spec.json" <<EOF
{"images": [
$(spec_kube kube-apiserver)
$(spec_kube kube-controller-manager)
$(spec_kube kube-scheduler)
$(spec_etcd)
$(spec_pause)
$(spec_proxy "$proxy_server_ref" "$proxy_server")
$(spec_proxy "$proxy_agent_ref" "$proxy_agent")
 {"ref": "$kubeadm_ref", "layers": [{"trees": [{"src": "$utils/tree", "dst": "/"}]}, {"files": [{"src": "$kube/kubeadm", "dst": "/usr/local/bin/kubeadm", "mode": "0755"}]}]}
]}
EOF
	log "writing the hosted control-plane images archive"
	"$tools/ociimage" containers -spec "$tmp/spec.json" -out "$tmp/hosted-images.tar"
	printf '%s\n' "${hosted_refs[@]}" >"$tmp/refs.txt"
}
step "$hosted" build_hosted

# --- 6. disk as assembled -----------------------------------------------------------
# What a VM boots with direct kernel boot (also written to manifest.json).
kernel_args="root=LABEL=knest-root ro console=ttyS0"
disk_hash=$(hash_inputs "$base_hash" "$images_hash" "${hosted_refs[*]}" "$version" "$here/rootfs/overlay" "$here/rootfs/templates" "$0" \
	"$kube/kubelet" "$kube/kubeadm" "$kube/kubectl" "$containerd_bin" "$runc_bin")
disk=$cache/disk/$version-$disk_hash
image_repo=${NODE_IMAGE_REPOSITORY:-knest/node}
kernel_repo=${NODE_KERNEL_REPOSITORY:-knest/node-kernel}
# install_runtime ROOT: containerd, its runc shim, ctr and runc where upstream's
# release archives put them (the unit, containerd.service, is in rootfs/overlay).
install_runtime() {
	local root=$1
	mkdir -p "$root/usr/local/bin" "$root/usr/local/sbin" "$root/etc/containerd"
	install -m 0755 "$containerd_bin/containerd" "$containerd_bin/containerd-shim-runc-v2" "$containerd_bin/ctr" "$root/usr/local/bin/"
	install -m 0755 "$runc_bin" "$root/usr/local/sbin/runc"
}
build_disk() {
	local root=$tmp/rootfs
	mkdir -p "$root"
	log "assembling the root filesystem"
	tar --xattrs --xattrs-include='*' --numeric-owner -xpf "$base/rootfs.tar" -C "$root"
	cp -a "$here/rootfs/overlay/." "$root/"
	systemctl --root="$root" --quiet enable systemd-networkd systemd-resolved containerd ssh kubelet knest-preload-images
	install -m 0755 "$kube/kubelet" "$kube/kubeadm" "$kube/kubectl" "$root/usr/bin/"
	install_runtime "$root"
	sed "s#@PAUSE_IMAGE@#$pause_ref#" "$here/rootfs/templates/containerd-config.toml" >"$root/etc/containerd/config.toml"
	mkdir -p "$root/opt/cni/bin" "$root/etc/cni/net.d" "$root/var/lib/knest/images" "$root/etc/knest"
	local p
	for p in "$root"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/$(basename "$p")" "$root/opt/cni/bin/"; done
	cp "$images/images.tar" "$root/var/lib/knest/images/images.tar"
	write_manifest >"$root/etc/knest/manifest.json"
	cp "$root/etc/knest/manifest.json" "$tmp/manifest.json"

	# The filesystem gets room for the unpacked images, etcd and logs on top of its
	# content; the raw file is sparse and the qcow2 holds only what is used.
	local used_mib size_mib
	used_mib=$(du -sm "$root" | cut -f1)
	size_mib=$((used_mib * 2 + ${KNEST_DISK_HEADROOM_MIB:-3072}))
	log "making a ${size_mib} MiB ext4 filesystem from ${used_mib} MiB of content"
	mkfs.ext4 -q -L knest-root -d "$root" "$tmp/disk.raw" "${size_mib}M"
	rm -rf "$root"
}
write_manifest() {
	local pkgs
	pkgs=$(grep -E '^(containernetworking-plugins|cloud-init|linux-image-[0-9].*|systemd|openssh-server|qemu-guest-agent|iptables)=' "$base/packages.lock" |
		sed 's/^\(.*\)=\(.*\)$/    "\1": "\2"/' | paste -sd, - | sed 's/,/,\n/g')
	local refs
	refs=$(sed 's/.*/    "&"/' "$images/refs.txt" | paste -sd, - | sed 's/,/,\n/g')
	# The hosted control plane's images are not on the disk (hosted-images.tar beside
	# it); one line, because the bake takes every line that is a bare quoted string
	# for a preloaded image (rootfs/overlay/usr/lib/knest/bake).
	local hosted_list
	hosted_list=$(sed 's/.*/"&"/' "$hosted/refs.txt" | paste -sd, - | sed 's/,/, /g')
	cat <<EOF
{
  "kubernetesVersion": "$version",
  "debianSuite": "${DEBIAN_SUITE:-bookworm}",
  "image": "$image_repo:$version",
  "kernelImage": "$kernel_repo:$version",
  "kernelPath": "/boot/vmlinuz",
  "initrdPath": "/boot/initrd.img",
  "kernelArgs": "$kernel_args",
  "criSocket": "unix:///var/run/containerd/containerd.sock",
  "cgroupDriver": "systemd",
  "containerd": "github.com/containerd/containerd/v2@$containerd_version",
  "runc": "github.com/opencontainers/runc@$runc_version",
  "flannelCNIPluginSource": "github.com/containernetworking/plugins/plugins/meta/flannel@$flannel_cni_version",
  "packages": {
$pkgs
  },
  "hostedControlPlaneImages": [$hosted_list],
  "images": [
$refs
  ]
}
EOF
}
step "$disk" build_disk

# --- 7. bake (import the images by booting once), qcow2, containerDisk archives ------
out_hash=$(hash_inputs "$disk_hash" "$tools_hash" "$hosted_hash" "$bake" "$kernel_args" "$here/scripts/bake.sh" "$0")
out=$cache/out/$version-$out_hash
build_out() {
	if [ "$bake" = true ]; then
		"$here/scripts/bake.sh" "$disk/disk.raw" "$base/vmlinuz" "$base/initrd.img" "$kernel_args" "$tmp"
	else
		cp --sparse=always "$disk/disk.raw" "$tmp/disk.raw"
	fi
	cp "$disk/manifest.json" "$base/vmlinuz" "$base/initrd.img" "$tmp/"
	log "converting to qcow2"
	qemu-img convert -c -O qcow2 "$tmp/disk.raw" "$tmp/disk.qcow2"
	log "writing the containerDisk archives"
	"$tools/ociimage" containerdisk -ref "$image_repo:$version" -disk "$tmp/disk.qcow2" -out "$tmp/node-containerdisk.tar"
	"$tools/ociimage" kernelboot -ref "$kernel_repo:$version" -kernel "$tmp/vmlinuz" -initrd "$tmp/initrd.img" -out "$tmp/node-kernel.tar"
	# A hard link: the same cache, and neither file is ever rewritten.
	ln "$hosted/hosted-images.tar" "$tmp/hosted-images.tar"
}
step "$out" build_out
ln -sfn "$(basename "$out")" "$cache/out/$version.tmp"
mv -T "$cache/out/$version.tmp" "$cache/out/$version"
prune_older "$disk"
prune_older "$out"
log "node image $version: $cache/out/$version"
ls -l "$cache/out/$version/" >&2

# --- 8. kind node (KNEST_KIND_NODE=true; images/kind/README.md) ----------------------
# In its own file, so that changing it does not invalidate the disk (hashed with $0).
[ "${KNEST_KIND_NODE:-false}" = true ] || exit 0
# shellcheck source=images/scripts/kind-node.sh
. "$here/scripts/kind-node.sh"
