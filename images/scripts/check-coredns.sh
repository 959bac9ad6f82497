#!/usr/bin/env bash
# Checks that a node image preloads the CoreDNS knest's control plane names for its
# Kubernetes minor (pkg/cluster/coredns.go), which an upgrade moves CoreDNS to, and
# the CoreDNS of every other minor listed there: during an upgrade the old minor's
# CoreDNS runs on (and is pulled by `kubeadm join` of) new nodes until Cluster API
# moves it, and a held pool's old nodes meet the new one. An air-gapped node can run
# no other.
#
# usage: check-coredns.sh VERSION OUTDIR CONSTS_FILE
set -euo pipefail
version=${1:?usage: check-coredns.sh VERSION OUTDIR CONSTS_FILE}
out=${2:?}
consts=${3:?}
[[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "ERROR: $version is not v1.MINOR.PATCH" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
have=$(grep -o '"[^"]*/coredns:v[0-9.]*"' "$out/manifest.json" | tr -d '"' | sed 's/.*://' | sort -u | paste -sd' ' - || true)
[ -n "$have" ] || { echo "ERROR: $out/manifest.json lists no CoreDNS image" >&2; exit 1; }
preloaded() { [[ " $have " == *" $1 "* ]]; }
# "MINOR TAG" per line of the list, e.g. "35 v1.13.1".
listed=$(sed -n 's/^[[:space:]]*coreDNSv1\([0-9]*\)[[:space:]]*=[[:space:]]*"\(v[0-9.]*\)".*/\1 \2/p' "$consts")
want=$(awk -v m="$minor" '$1 == m {print $2}' <<<"$listed")
if [ -z "$want" ]; then
	echo "WARNING: $consts names no CoreDNS for v1.$minor: upgrades to v1.$minor keep the running CoreDNS; add coreDNSv1$minor (preloaded here: $have)" >&2
elif ! preloaded "$want"; then
	echo "ERROR: the $version node image preloads CoreDNS $have, $consts names $want for v1.$minor: make them agree" >&2
	exit 1
fi
missing=
for t in $(awk '{print $2}' <<<"$listed"); do
	preloaded "$t" || missing="$missing $t"
done
if [ -n "$missing" ]; then
	echo "ERROR: the $version node image lacks CoreDNS$missing, which $consts names for another minor (preloaded: $have): rebuild it with make node-image" >&2
	exit 1
fi
echo "CoreDNS $have preloaded: ${want:-none} for v1.$minor, as $consts names it, and every other minor's"
