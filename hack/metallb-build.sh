#!/usr/bin/env bash
# Builds MetalLB's controller and speaker, the kind host's LoadBalancer implementation,
# from the module hack/tools/kind/metallb pins.
#
# Why not a plain go build: MetalLB v0.16.2 requires github.com/metallb/frr-k8s v0.0.27,
# whose API (api/v1beta1) it compiles in for its frr-k8s BGP mode, and the module proxy
# refuses that version; v0.0.26 is served (the tools module replaces v0.0.27 with it) and
# lacks one addition MetalLB uses: Advertise.PrefixesWithAsPathPrepend and its type
# AsPathPrependPrefixes (BGP AS-path prepending). knest's host runs MetalLB's native L2
# mode, which never builds an FRRConfiguration, so those only need to compile. This
# script adds them to a copy of frr-k8s v0.0.26 from the module cache (after checking
# the files are exactly the ones it was written against: another version stops the
# build) and builds in a scratch copy of the tools module with a replace to the copy.
# Nothing of frr-k8s is kept in this repository.
#
# Usage: hack/metallb-build.sh OUTPUT_DIR (writes OUTPUT_DIR/controller and
# OUTPUT_DIR/speaker).
set -euo pipefail

out=${1:?usage: $0 OUTPUT_DIR}
out=${out%/}
[[ $(basename "$out") == v* ]] || { echo "ERROR: $out: the output directory is named by the version (…/metallb/vX.Y.Z)" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
tools=$here/hack/tools/kind/metallb
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { echo "ERROR: $*" >&2; exit 1; }

frr_version=v0.0.26
types=api/v1beta1/frrconfiguration_types.go
deepcopy=api/v1beta1/zz_generated.deepcopy.go
declare -A want_sha=(
	[$types]=0f26fa45222467054bc5c0cf1164d31e8932e6c756b00859e0c905f07ca10a6f
	[$deepcopy]=6c391f3a7d14ddea77309b829cbcb59d6f75247862715e127370ea5a39a2c9bf
)

# go list -m names the module's directory without fetching it: fetch it first (an
# empty module cache on a fresh machine).
(cd "$tools" && $GO mod download github.com/metallb/frr-k8s)
frr=$(cd "$tools" && $GO list -m -f '{{if .Replace}}{{.Replace.Dir}} {{.Replace.Version}}{{end}}' github.com/metallb/frr-k8s)
[[ ${frr#* } == "$frr_version" ]] || die "hack/tools/kind/metallb does not replace github.com/metallb/frr-k8s with $frr_version"
frr=${frr% *}
[[ -d $frr ]] || die "github.com/metallb/frr-k8s $frr_version is not in the module cache after go mod download"

rm -rf "$out.tmp" && mkdir -p "$out.tmp/scratch"
log "copying github.com/metallb/frr-k8s $frr_version from the module cache"
cp -R "$frr" "$out.tmp/frr-k8s"
chmod -R u+w "$out.tmp/frr-k8s"
for f in "$types" "$deepcopy"; do
	got=$(sha256sum "$out.tmp/frr-k8s/$f" | cut -d' ' -f1)
	[[ $got == "${want_sha[$f]}" ]] ||
		die "$f of frr-k8s $frr_version is not the file this script was written for (sha256 $got); check $0"
done
# The field, after PrefixesWithCommunity (the last one of Advertise).
# shellcheck disable=SC2016 # Go's struct tag, not an expansion.
sed -i '/^\tPrefixesWithCommunity \[\]CommunityPrefixes `json:"withCommunity,omitempty"`$/a\
\
\t// PrefixesWithAsPathPrepend (added for MetalLB v0.16.2, see hack/metallb-build.sh).\
\t// +optional\
\tPrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`' "$out.tmp/frr-k8s/$types"
# Its deep copy, after PrefixesWithCommunity's in Advertise.DeepCopyInto.
sed -i '/^func (in \*Advertise) DeepCopyInto/,/^}/{/^}/i\
\tif in.PrefixesWithAsPathPrepend != nil {\
\t\tin, out := \&in.PrefixesWithAsPathPrepend, \&out.PrefixesWithAsPathPrepend\
\t\t*out = make([]AsPathPrependPrefixes, len(*in))\
\t\tfor i := range *in {\
\t\t\t(*in)[i].DeepCopyInto(\&(*out)[i])\
\t\t}\
\t}
}' "$out.tmp/frr-k8s/$deepcopy"
cat >"$out.tmp/frr-k8s/api/v1beta1/zz_knest_aspathprepend.go" <<'GO'
package v1beta1

// AsPathPrependPrefixes is a list of prefixes advertised with the local AS prepended
// AsPathPrepend times (added for MetalLB v0.16.2, see knest's hack/metallb-build.sh).
type AsPathPrependPrefixes struct {
	Prefixes      []string `json:"prefixes,omitempty"`
	AsPathPrepend uint8    `json:"asPathPrepend,omitempty"`
}

// DeepCopyInto copies the receiver into out.
func (in *AsPathPrependPrefixes) DeepCopyInto(out *AsPathPrependPrefixes) {
	*out = *in
	if in.Prefixes != nil {
		out.Prefixes = append([]string(nil), in.Prefixes...)
	}
}
GO
[[ $(grep -c PrefixesWithAsPathPrepend "$out.tmp/frr-k8s/$types") == 2 && $(grep -c PrefixesWithAsPathPrepend "$out.tmp/frr-k8s/$deepcopy") == 2 ]] ||
	die "the frr-k8s change did not apply"

# The replace names the final path; build there, after the rename.
cp "$tools/go.mod" "$tools/go.sum" "$tools/tools.go" "$out.tmp/scratch/"
(cd "$out.tmp/scratch" && $GO mod edit -module knest.local/metallb -replace "github.com/metallb/frr-k8s=$out/frr-k8s")
rm -rf "$out" && mv "$out.tmp" "$out"
cd "$out/scratch"
# What upstream's Dockerfiles build: static binaries.
for cmd in controller speaker; do
	log "MetalLB $cmd"
	CGO_ENABLED=0 $GO build -trimpath -ldflags '-s -w' -o "$out/$cmd" "go.universe.tf/metallb/$cmd"
done
