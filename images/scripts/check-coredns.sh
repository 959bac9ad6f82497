#!/usr/bin/env bash
# Checks that the CoreDNS a node image preloads is the one knest's control plane names
# for its Kubernetes minor (pkg/cluster/coredns.go): an upgrade moves CoreDNS to that
# image, and an air-gapped node can run no other.
#
# usage: check-coredns.sh VERSION OUTDIR CONSTS_FILE
set -euo pipefail
version=${1:?usage: check-coredns.sh VERSION OUTDIR CONSTS_FILE}
out=${2:?}
consts=${3:?}
[[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "ERROR: $version is not v1.MINOR.PATCH" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
image=$(grep -o '"[^"]*/coredns:v[0-9.]*"' "$out/manifest.json" | tr -d '"' | head -1)
[ -n "$image" ] || { echo "ERROR: $out/manifest.json lists no CoreDNS image" >&2; exit 1; }
have=${image##*:}
want=$(sed -n 's/^[[:space:]]*coreDNSv1'"$minor"'[[:space:]]*=[[:space:]]*"\(v[0-9.]*\)".*/\1/p' "$consts")
if [ -z "$want" ]; then
	echo "WARNING: $consts names no CoreDNS for v1.$minor: upgrades to v1.$minor keep the running CoreDNS, whose image these nodes lack; add coreDNSv1$minor = \"$have\"" >&2
elif [ "$want" != "$have" ]; then
	echo "ERROR: the $version node image preloads CoreDNS $have, $consts names $want for v1.$minor: make them agree" >&2
	exit 1
else
	echo "CoreDNS $have: as $consts names it for v1.$minor"
fi
