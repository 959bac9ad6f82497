#!/usr/bin/env bash
# Brings up the host cluster for `make e2e-kind` (docs/e2e.md): a kind cluster with
# KubeVirt, Cluster API + CAPK installed by clusterctl, the knest controller, and the
# node image in a local registry the kind nodes pull from. Running it again on an
# existing cluster updates it. Needs docker, kind, kubectl, go, internet and the
# output of `make node-image`. Settings: hack/kind/env.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

step() { printf '\n== %s\n' "$*"; }
die() { echo "up.sh: $*" >&2; exit 1; }
crane() { "$GO" run "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" "$@"; }
clusterctl() {
  CLUSTERCTL_DISABLE_VERSIONCHECK=true "$GO" run -ldflags "-X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION" \
    "sigs.k8s.io/cluster-api/cmd/clusterctl@$CAPI_VERSION" "$@"
}

for tool in docker kind kubectl "$GO"; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
for f in node-containerdisk.tar node-kernel.tar; do
  [[ -f $NODE_IMAGE_DIR/$f ]] || die "$NODE_IMAGE_DIR/$f missing: run make node-image"
done
# Where a kernel does not boot under KVM (no /dev/kvm, or one that does not work),
# KubeVirt runs the VMs under qemu's software emulation (slow).
emulation=true
if [[ $(images/scripts/kvm-probe.sh "$NODE_IMAGE_DIR/vmlinuz") == kvm ]]; then emulation=false; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$KIND_KUBECONFIG")"
export KUBECONFIG=$KIND_KUBECONFIG

step "registry $KIND_REGISTRY_NAME on localhost:$KIND_REGISTRY_PORT"
if ! docker inspect "$KIND_REGISTRY_NAME" >/dev/null 2>&1; then
  docker run -d --restart=always -p "127.0.0.1:$KIND_REGISTRY_PORT:5000" --network bridge \
    --name "$KIND_REGISTRY_NAME" registry:2
fi
docker start "$KIND_REGISTRY_NAME" >/dev/null

step "kind cluster $KIND_CLUSTER ($KIND_IMAGE)"
if ! grep -qx "$KIND_CLUSTER" <<<"$(kind get clusters)"; then
  kvm_mount=""
  if ! $emulation; then
    kvm_mount=$'  extraMounts:\n  - {hostPath: /dev/kvm, containerPath: /dev/kvm}'
  fi
  kind create cluster --name "$KIND_CLUSTER" --image "$KIND_IMAGE" --kubeconfig "$KIND_KUBECONFIG" \
    --wait 5m --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
nodes:
- role: control-plane
$kvm_mount
EOF
fi
kind get kubeconfig --name "$KIND_CLUSTER" >"$KIND_KUBECONFIG"

# kind's local registry recipe: the nodes' containerd sends localhost:PORT to the
# registry container, which joins the kind network.
mapfile -t nodes < <(kind get nodes --name "$KIND_CLUSTER")
for node in "${nodes[@]}"; do
  dir=/etc/containerd/certs.d/localhost:$KIND_REGISTRY_PORT
  docker exec "$node" mkdir -p "$dir"
  printf '[host."http://%s:5000"]\n' "$KIND_REGISTRY_NAME" | docker exec -i "$node" cp /dev/stdin "$dir/hosts.toml"
done
if [[ $(docker inspect -f '{{json .NetworkSettings.Networks.kind}}' "$KIND_REGISTRY_NAME") == null ]]; then
  docker network connect kind "$KIND_REGISTRY_NAME"
fi
kubectl apply -f - <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: local-registry-hosting, namespace: kube-public}
data:
  localRegistryHosting.v1: |
    host: "localhost:$KIND_REGISTRY_PORT"
    help: "https://kind.sigs.k8s.io/docs/user/local-registry/"
EOF

step "node image $NODE_IMAGE_DIR -> $NODE_IMAGE_REF, $KERNEL_IMAGE_REF"
# The archives are OCI layouts in a tar with one image each; crane pushes a layout
# directory and prints the pushed reference by digest.
push() { # archive, reference
  local layout=$tmp/${1%.tar}
  mkdir -p "$layout"
  tar -xf "$NODE_IMAGE_DIR/$1" -C "$layout"
  crane push "$layout" "$2"
}
node_image=$(push node-containerdisk.tar "$NODE_IMAGE_REF")
kernel_image=$(push node-kernel.tar "$KERNEL_IMAGE_REF")

step "KubeVirt $KUBEVIRT_VERSION (useEmulation: $emulation)"
kubectl apply -f "https://github.com/kubevirt/kubevirt/releases/download/$KUBEVIRT_VERSION/kubevirt-operator.yaml"
kubectl wait --for=condition=Established crd/kubevirts.kubevirt.io --timeout=2m
kubectl -n kubevirt rollout status deploy/virt-operator --timeout=10m
kubectl apply -f - <<EOF
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    developerConfiguration:
      useEmulation: $emulation
EOF
kubectl -n kubevirt wait kubevirt/kubevirt --for=condition=Available --timeout=20m

step "Cluster API $CAPI_VERSION, CAPK $CAPK_VERSION (clusterctl also installs cert-manager)"
if [[ $(kubectl get providers.clusterctl.cluster.x-k8s.io -A -o name 2>/dev/null || true) == *infrastructure-kubevirt* ]]; then
  echo "already installed"
else
  clusterctl init --kubeconfig "$KIND_KUBECONFIG" \
    --core "cluster-api:$CAPI_VERSION" --bootstrap "kubeadm:$CAPI_VERSION" \
    --control-plane "kubeadm:$CAPI_VERSION" --infrastructure "kubevirt:$CAPK_VERSION" \
    --wait-providers --wait-provider-timeout 900
fi

step "knest controller"
docker build --build-arg "GO_VERSION=$(awk '$1 == "go" {print $2}' go.mod)" -t knest:dev .
# A tag per build, so a rebuilt image rolls the Deployment.
tag=e2e-$(docker image inspect -f '{{.Id}}' knest:dev | cut -c8-19)
docker tag knest:dev "knest:$tag"
kind load docker-image "knest:$tag" --name "$KIND_CLUSTER"
# config/default with that tag, through an overlay in a copy of config/.
cp -R config "$tmp/config"
mkdir -p "$tmp/config/kind"
cat >"$tmp/config/kind/kustomization.yaml" <<EOF
resources: [../default]
images: [{name: knest, newTag: $tag}]
EOF
kubectl apply -k "$tmp/config/kind"
kubectl -n knest-system rollout status deploy/knest-controller --timeout=5m

step "ready: source $KIND_ENV_FILE"
tee "$KIND_ENV_FILE" <<EOF
export KUBECONFIG=$KIND_KUBECONFIG
export KNEST_E2E_HOST_KUBECONFIG=$KIND_KUBECONFIG
export KNEST_E2E_NODE_IMAGE=$node_image
export KNEST_E2E_KERNEL_IMAGE=$kernel_image
EOF
