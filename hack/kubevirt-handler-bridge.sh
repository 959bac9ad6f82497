#!/usr/bin/env bash
# Builds virt-handler for kernels without the dummy network driver (CONFIG_DUMMY), the
# one place knest's KubeVirt differs from upstream (docs/e2e.md, "virt-handler"):
#
# KubeVirt's bridge binding (pkg/network/setup/netpod/netpod.go) renames the pod's eth0
# to eth0-nic, makes it a port of bridge k6t-eth0, and creates a new link eth0 of type
# dummy that keeps the pod's MAC, MTU and addresses and is never brought up. Nothing
# reads that link's type afterwards: virt-launcher looks eth0 up by name for its MAC
# and MTU, the DHCP settings are cached before the rename, and the VMI's IP comes from
# a cache. On a kernel without the dummy driver virt-handler fails with "LinkAdd:
# operation not supported" and no VM gets a network; an empty Linux bridge holds the
# same addresses just as well. So this build makes eth0 (and managedTap's twin) a
# bridge, and nothing else.
#
# How: a copy of the kubevirt.io/kubevirt module from the module cache (Go refuses
# -overlay for files in the cache), the two lines changed after checking the file is
# exactly the one this was written against (any other KubeVirt version stops the
# build), KubeVirt's own netpod tests run on the copy with their expected type changed
# alike, and virt-handler built in a scratch module: hack/tools/kubevirt's go.mod with
# a replace to the copy. Nothing of KubeVirt's is kept in this repository.
#
# Usage: hack/kubevirt-handler-bridge.sh OUTPUT (KUBEVIRT_DIR, KUBEVIRT_VERSION,
# KUBEVIRT_LDFLAGS from hack/kubevirt.mk).
set -euo pipefail

out=${1:?usage: $0 OUTPUT}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${KUBEVIRT_DIR:?}
version=${KUBEVIRT_VERSION:?}
GO=${GO:-go}
tools=$here/hack/tools/kubevirt
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { echo "ERROR: $*" >&2; exit 1; }

# What the change was written against: KubeVirt v1.7.0's netpod.go and its test.
netpod=pkg/network/setup/netpod/netpod.go
netpod_test=pkg/network/setup/netpod/netpod_test.go
declare -A want_sha=(
	[$netpod]=774c614c59db9f86859eeecb79126b7301aa5f9b77c066d26a51ed851d18d3bd
	[$netpod_test]=7b19e29ea746fc69ef3122612a02d207b20836341842b106315120e07c8bc8ba
)
declare -A want_count=([$netpod]=2 [$netpod_test]=15)
from='TypeName:   nmstate.TypeDummy,'
to='TypeName:   nmstate.TypeBridge,'

mod=$(cd "$tools" && $GO list -m -f '{{.Dir}}' kubevirt.io/kubevirt)
[[ $(cd "$tools" && $GO list -m -f '{{.Version}}' kubevirt.io/kubevirt) == "$version" ]] ||
	die "hack/tools/kubevirt pins another kubevirt.io/kubevirt than $version"

work=$dir/eth0-bridge
rm -rf "$work.tmp" && mkdir -p "$work.tmp/scratch"
log "copying kubevirt.io/kubevirt $version from the module cache"
cp -R "$mod" "$work.tmp/kubevirt"
chmod -R u+w "$work.tmp/kubevirt"
for f in "$netpod" "$netpod_test"; do
	p=$work.tmp/kubevirt/$f
	got=$(sha256sum "$p" | cut -d' ' -f1)
	[[ $got == "${want_sha[$f]}" ]] ||
		die "$f of kubevirt.io/kubevirt $version is not the file the eth0-bridge change was written for (sha256 $got); check the change against this version and update $0"
	n=$(grep -cF "$from" "$p" || true)
	[[ $n == "${want_count[$f]}" ]] || die "$f: $n lines with '$from', expected ${want_count[$f]}"
	sed -i "s/TypeName:   nmstate\.TypeDummy,/TypeName:   nmstate.TypeBridge,/" "$p"
	[[ $(grep -cF "$to" "$p") -ge ${want_count[$f]} && $(grep -cF "$from" "$p" || true) == 0 ]] ||
		die "$f: the change did not apply"
done

cp "$tools/go.mod" "$tools/go.sum" "$work.tmp/scratch/"
(
	cd "$work.tmp/scratch"
	$GO mod edit -module knest.local/kubevirt-eth0-bridge -replace "kubevirt.io/kubevirt=$work/kubevirt"
	# The replace names the final path; build and test there, after the rename.
)
rm -rf "$work" && mv "$work.tmp" "$work"
cd "$work/scratch"
# The test packages need modules the tools module never built (ginkgo, gomock).
export GOFLAGS=-mod=mod
log "KubeVirt's netpod tests on the changed copy"
$GO test -count=1 kubevirt.io/kubevirt/pkg/network/setup/netpod/...
log "virt-handler with eth0 as a bridge"
CGO_ENABLED=1 $GO build -trimpath -ldflags "${KUBEVIRT_LDFLAGS:-}" -o "$out.tmp" kubevirt.io/kubevirt/cmd/virt-handler
mv "$out.tmp" "$out"
log "built $out"
