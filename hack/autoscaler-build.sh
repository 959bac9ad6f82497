#!/usr/bin/env bash
# Builds the upstream Kubernetes cluster-autoscaler with only its Cluster API provider
# (build tag clusterapi) from the module hack/tools/autoscaler pins, for the
# per-tenant autoscalers of knest's pools (hack/autoscaler.mk).
#
# Why not a plain `go build` in the tools module: the only cluster-autoscaler the
# module proxy serves (a pseudo-version of June 2025, release 1.33.0) imports its API
# module, k8s.io/autoscaler/cluster-autoscaler/apis, through `replace ... => ./apis`,
# which applies only inside upstream's repository, and requires the apis module at a
# pseudo-version of June 2024: the only one the proxy serves. That version has the
# ProvisioningRequest API as v1beta1 only; the autoscaler imports v1 of it (the same
# types, promoted later) and two constants added to v1 since. So, as
# hack/kubevirt-handler-bridge.sh does for KubeVirt, the apis module is taken from the
# module cache (verified against hack/tools/autoscaler/go.sum), a copy is made with
# the v1beta1 package renamed v1, the two constants (pod annotation keys, values as
# upstream's v1) added, and its clientset, listers and informers generated anew for
# v1 by k8s.io/code-generator at the autoscaler's Kubernetes version; the autoscaler
# is then built in a scratch module: the tools module's go.mod and go.sum with a
# replace to that copy, and to a copy of the autoscaler module in which one function
# is fixed (scale to zero, below). Nothing of the autoscaler's is kept in this
# repository.
#
# The ProvisioningRequest API is used only with --enable-provisioning-requests (off by
# default, and knest does not set it); the rest of the autoscaler is upstream's code as
# the proxy serves it.
#
# Usage: hack/autoscaler-build.sh OUTPUT (AUTOSCALER_DIR, AUTOSCALER_RELEASE from
# hack/autoscaler.mk).
set -euo pipefail

out=${1:?usage: $0 OUTPUT}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${AUTOSCALER_DIR:?}
release=${AUTOSCALER_RELEASE:?}
GO=${GO:-go}
tools=$here/hack/tools/autoscaler
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { echo "ERROR: $*" >&2; exit 1; }

ca=k8s.io/autoscaler/cluster-autoscaler
apis=$ca/apis
pr=$apis/provisioningrequest

ca_dir=$(cd "$tools" && $GO mod download -json "$ca" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
apis_dir=$(cd "$tools" && $GO mod download -json "$apis" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $ca_dir && -d $apis_dir ]] || die "go mod download $ca $apis (in $tools) gave no directories"
got=$(sed -n 's/^const ClusterAutoscalerVersion = "\(.*\)"$/\1/p' "$ca_dir/version/version.go")
[[ $got == "$release" ]] || die "$ca in $tools is release $got, hack/autoscaler.mk says $release"

work=$dir/src
rm -rf "$work.tmp" && mkdir -p "$work.tmp/scratch" "$work.tmp/bin"
log "copying $apis from the module cache; ProvisioningRequest v1beta1 as v1"
cp -R "$apis_dir" "$work.tmp/apis"
chmod -R u+w "$work.tmp/apis"
types=$work.tmp/apis/provisioningrequest/autoscaling.x-k8s.io
[[ -d $types/v1beta1 && ! -e $types/v1 ]] ||
	die "$apis is not the version this was written for (expected autoscaling.x-k8s.io/v1beta1 and no v1): check it and update $0"
mv "$types/v1beta1" "$types/v1"
# Generated anew below, for v1.
rm -rf "$work.tmp/apis/provisioningrequest/client"
sed -i -e 's/^package v1beta1$/package v1/' -e 's/^\(\tGroupVersion = \)"v1beta1"$/\1"v1"/' "$types"/v1/*.go
grep -q '^	GroupVersion = "v1"$' "$types/v1/register.go" || die "$types/v1/register.go: the version did not change"
! grep -q '^package v1beta1$' "$types"/v1/*.go || die "$types/v1: a file is still package v1beta1"
! grep -rq 'PodAnnotationKey' "$types/v1" || die "$types/v1 already has the pod annotation keys: update $0"
cat >"$types/v1/annotations.go" <<'EOF'
package v1

// The pod annotations of ProvisioningRequest v1 (added to the API after the apis
// module version the module proxy serves; written by hack/autoscaler-build.sh).
const (
	// ProvisioningRequestPodAnnotationKey annotates pods consuming a provisioning request.
	ProvisioningRequestPodAnnotationKey = "autoscaling.x-k8s.io/consume-provisioning-request"
	// ProvisioningClassPodAnnotationKey annotates pods with their provisioning class.
	ProvisioningClassPodAnnotationKey = "autoscaling.x-k8s.io/provisioning-class-name"
)
EOF

# Scale to zero: the clusterapi provider sets a MachineDeployment's size with a merge
# patch of an autoscaling/v1 Scale, whose replicas field is omitempty, so a size of 0
# is left out and the pool never reaches zero (upstream's regression of
# kubernetes/autoscaler#7908, fixed after this commit by #8412). The copy patches
# {"spec":{"replicas":N}} with N always there. Checked by checksum: a new module
# version needs this looked at again.
log "copying $ca from the module cache; its scale to zero fixed as upstream's #8412"
cp -R "$ca_dir" "$work.tmp/ca"
chmod -R u+w "$work.tmp/ca"
unstructured=$work.tmp/ca/cloudprovider/clusterapi/clusterapi_unstructured.go
echo "22da791c27ec13755f6888e678e862632594147ed8567208f223879cc350c8cb  $unstructured" | sha256sum --check --quiet ||
	die "$unstructured is not the file this was written for: check whether scale to zero still needs fixing and update $0"
perl -0pi -e 's/\tspec := autoscalingv1\.Scale\{\n\t\tSpec: autoscalingv1\.ScaleSpec\{\n\t\t\tReplicas: int32\(nreplicas\),\n\t\t\},\n\t\}\n/\t\/\/ knest: replicas 0 must not be left out (autoscaling\/v1 omits it when empty).\n\tspec := map[string]any{"spec": map[string]any{"replicas": nreplicas}}\n/' "$unstructured"
perl -0pi -e 's/\n\tautoscalingv1 "k8s.io\/api\/autoscaling\/v1"//' "$unstructured"
grep -q '"replicas": nreplicas' "$unstructured" && ! grep -q autoscalingv1 "$unstructured" ||
	die "$unstructured: the scale-to-zero fix did not apply"

cp "$tools/go.mod" "$tools/go.sum" "$work.tmp/scratch/"
(
	cd "$work.tmp/scratch"
	# The replaces name the final paths; generate and build there, after the rename.
	$GO mod edit -module knest.local/cluster-autoscaler -replace "$apis=$work/apis" -replace "$ca=$work/ca"
)
rm -rf "$work" && mv "$work.tmp" "$work"
cd "$work/scratch"

log "generating the ProvisioningRequest v1 clientset, listers and informers (k8s.io/code-generator)"
$GO build -o "$work/bin/" k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen \
	k8s.io/code-generator/cmd/informer-gen
printf '// Code generated for knest by hack/autoscaler-build.sh from %s. DO NOT EDIT.\n\n' "$apis" >"$work/header.txt"
client=$work/apis/provisioningrequest/client
"$work/bin/client-gen" --go-header-file "$work/header.txt" --clientset-name versioned --input-base "" \
	--input "$pr/autoscaling.x-k8s.io/v1" --output-pkg "$pr/client/clientset" --output-dir "$client/clientset"
"$work/bin/lister-gen" --go-header-file "$work/header.txt" --output-pkg "$pr/client/listers" \
	--output-dir "$client/listers" "$pr/autoscaling.x-k8s.io/v1"
"$work/bin/informer-gen" --go-header-file "$work/header.txt" --versioned-clientset-package "$pr/client/clientset/versioned" \
	--listers-package "$pr/client/listers" --output-pkg "$pr/client/informers" --output-dir "$client/informers" \
	"$pr/autoscaling.x-k8s.io/v1"

rm -rf "$work/bin"
log "cluster-autoscaler $release with the Cluster API provider only"
CGO_ENABLED=0 $GO build -tags clusterapi -trimpath -ldflags '-s -w' -o "$out.tmp" "$ca"
mv "$out.tmp" "$out"
log "built $out"
