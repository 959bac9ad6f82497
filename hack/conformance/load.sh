#!/usr/bin/env bash
# Loads the node image with the conformance suite's images baked in
# (knest/node-conformance:<NODE_KUBE_VERSION>, hack/conformance/build.sh) into every
# node of the kind host, once per build: `make conformance` and `make e2e` (whose
# hosted tenant runs the suite's smoke part) after hack/kind/up.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/../kind/env.sh"

kind_engine
version=$NODE_KUBE_VERSION
archive=$KNEST_CACHE/conformance/$version/node/node-containerdisk.tar
[[ -f $archive ]] || { echo "conformance: no $archive: make conformance-images" >&2; exit 1; }
ref=docker.io/knest/node-conformance:$version

mapfile -t nodes < <("$KIND" get nodes --name "$KIND_CLUSTER")
want=$(tar -xOf "$archive" index.json | sha256sum | cut -c1-16)
stale=false
for node in "${nodes[@]}"; do
  have=$("$KIND_ENGINE" exec "$node" cat /var/lib/knest-conformance-image 2>/dev/null || true)
  [[ $have == "$want" ]] || stale=true
done
$stale || exit 0
printf '%s loading %s into the kind host\n' "$(date -u +%H:%M:%S)" "$ref"
"$KIND" load image-archive "$archive" --name "$KIND_CLUSTER"
# The archive names it index.docker.io/...; the CRI looks it up as docker.io/...
# (as up.sh does for every archive).
for node in "${nodes[@]}"; do
  "$KIND_ENGINE" exec "$node" sh -c "ctr -n k8s.io images tag --force index.docker.io/knest/node-conformance:$version $ref >/dev/null 2>&1 &&
    echo $want >/var/lib/knest-conformance-image"
done
