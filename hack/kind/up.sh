#!/usr/bin/env bash
# Brings up the host cluster for `make e2e` (docs/e2e.md), offline: a kind cluster
# (podman or Docker) from the kind node image built here, local-path-provisioner as
# the default StorageClass, MetalLB (L2) for LoadBalancer Services, KubeVirt from
# images built from its module (volume hotplug on), Cluster API + CAPK managers as Deployments, knest's controller by
# `kubectl apply -k config/default`, and the tenant node images and hosted control-plane
# images of each version in NODE_IMAGE_VERSIONS loaded into the node's containerd.
# Nothing is pulled from a registry. Running it again on an existing cluster updates
# it. Settings: hack/kind/env.sh; what it needs: hack/kind.mk.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

start=$SECONDS
step() { printf '\n== [%4ds] %s\n' $((SECONDS - start)) "$*"; }
die() { echo "up.sh: $*" >&2; exit 1; }
kubectl() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
# wait_for SECONDS CONDITION OBJECT [kubectl args]: kubectl wait fails at once, not
# waits, on an object whose status has no conditions yet (".status.conditions accessor
# error"), so it is retried until SECONDS have passed.
wait_for() {
  local condition=$2 end=$((SECONDS + $1))
  shift 2
  until kubectl wait --for="condition=$condition" --timeout=30s "$@" 2>/dev/null; do
    ((SECONDS < end)) || { kubectl wait --for="condition=$condition" --timeout=1s "$@"; return; }
    sleep 2
  done
}

kind_engine
[[ " $NODE_IMAGE_VERSIONS " == *" $NODE_KUBE_VERSION "* ]] ||
  die "NODE_IMAGE_VERSIONS ($NODE_IMAGE_VERSIONS) does not include NODE_KUBE_VERSION ($NODE_KUBE_VERSION), whose images the env file names"
node_images=() hosted_images=()
for v in $NODE_IMAGE_VERSIONS; do
  node_images+=("$NODE_IMAGES_DIR/$v/node-containerdisk.tar" "$NODE_IMAGES_DIR/$v/node-kernel.tar")
  hosted_images+=("$NODE_IMAGES_DIR/$v/hosted-images.tar")
done
for f in "$KIND" "$KUBE_BIN_DIR/kubectl" "$KIND_NODE_DIR/kind-node.tar" "${node_images[@]}" \
  "$KUBEVIRT_IMAGES_DIR/kubevirt-images.tar" "$KUBEVIRT_IMAGES_DIR/kubevirt-operator.yaml" "$PROVIDERS_INSTALL/components.yaml" \
  "$AUTOSCALER_DIR/cluster-autoscaler" "$METALLB_DIR/controller" "$METALLB_DIR/speaker"; do
  [[ -e $f ]] || die "$f missing: run make e2e (or the target that builds it, see hack/kind.mk; make node-images for every version)"
done
# What hosted control planes run on this host (images/build.sh writes it beside the
# node image; a node image built before hosted control planes has none).
for f in "${hosted_images[@]}"; do
  v=$(basename "$(dirname "$f")")
  [[ -e $f ]] || die "$f missing (the hosted control-plane images of $v): run make node-image NODE_KUBE_VERSION=$v (make node-images for every version)"
done
command -v "$KIND_ENGINE" >/dev/null || die "$KIND_ENGINE not found (make kind-tools installs podman)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$KIND_KUBECONFIG")"

# KubeVirt uses KVM only where a kernel boots under it; /dev/kvm existing is not enough.
accel=$(images/scripts/kvm-probe.sh "$NODE_IMAGES_DIR/$NODE_KUBE_VERSION/vmlinuz")
emulation=true
if [[ $accel == kvm ]]; then emulation=false; fi
if [[ -z $KNEST_HOST_SLOWDOWN ]]; then
  KNEST_HOST_SLOWDOWN=1
  if [[ $emulation == true ]]; then KNEST_HOST_SLOWDOWN=3; fi
fi
step "engine $KIND_ENGINE; VMs under $accel (KubeVirt useEmulation: $emulation)"

# The node image, named by its build (the directory name carries the inputs' hash),
# so a rebuilt one is imported again and an unchanged one is not.
kind_image=knest.local/kind-node:$(basename "$(readlink -f "$KIND_NODE_DIR")")
step "kind node image $kind_image"
if ! "$KIND_ENGINE" image inspect "$kind_image" >/dev/null 2>&1; then
  "$KIND_ENGINE" import --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'STOPSIGNAL SIGRTMIN+3' --change 'ENV container=docker' "$KIND_NODE_DIR/kind-node.tar" "$kind_image"
fi
# Earlier builds' node images (1 GB each), unless a cluster's node still runs one.
"$KIND_ENGINE" image ls --format '{{.Repository}}:{{.Tag}}' | grep '^knest.local/kind-node:' | grep -vxF "$kind_image" |
  while read -r old; do "$KIND_ENGINE" image rm "$old" >/dev/null 2>&1 || true; done || true

step "kind cluster $KIND_CLUSTER"
service_cidr=10.96.0.0/16 pod_cidr=10.244.0.0/16
# kind bind-mounts the host's /lib/modules into the node; some hosts have none.
[[ -d /lib/modules ]] || mkdir -p /lib/modules
# A cluster whose node container is not running (a run killed while deleting it
# leaves it "Stopping") is made anew.
if grep -qx "$KIND_CLUSTER" <<<"$("$KIND" get clusters 2>/dev/null)"; then
  for node in $("$KIND" get nodes --name "$KIND_CLUSTER" 2>/dev/null); do
    if [[ $("$KIND_ENGINE" inspect -f '{{.State.Running}}' "$node" 2>/dev/null) != true ]]; then
      echo "node $node is not running: deleting the cluster"
      "$KIND" delete cluster --name "$KIND_CLUSTER" || "$KIND_ENGINE" rm -f "$node"
      break
    fi
  done
fi
[[ $KIND_WORKERS =~ ^[0-9]+$ ]] || die "KIND_WORKERS must be a number of worker nodes (0 or more), not '$KIND_WORKERS'"
if grep -qx "$KIND_CLUSTER" <<<"$("$KIND" get clusters 2>/dev/null)"; then
  have=$("$KIND" get nodes --name "$KIND_CLUSTER" | wc -l)
  ((have == KIND_WORKERS + 1)) ||
    die "kind cluster $KIND_CLUSTER has $have nodes, not $((KIND_WORKERS + 1)) (KIND_WORKERS=$KIND_WORKERS): delete it first (make kind-down)"
else
  mkdir -p "$KIND_SHARED_DIR"
  node_mounts=$'\n  extraMounts:\n  - {hostPath: '"$KIND_SHARED_DIR"$', containerPath: /var/knest-shared}'
  if ! $emulation; then node_mounts+=$'\n  - {hostPath: /dev/kvm, containerPath: /dev/kvm}'; fi
  # On a cgroup v1 host the node's containerd drives runc's cgroupfs driver, not
  # systemd's (the kubelet takes the driver from containerd). runc's systemd v1 driver
  # freezes every new container while systemd rewrites its device rules, and fails
  # the start when the freeze takes more than 2 s ("unable to freeze"): starting four
  # hosted tenants at once failed 18 container starts, local-path's helper pods
  # among them, whose volumes then waited out the helper's whole timeout. The
  # cgroupfs driver writes device rules without freezing.
  containerd_patches=""
  if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs ]]; then
    containerd_patches=$'containerdConfigPatches:\n- |-\n'
    containerd_patches+=$'  [plugins.\'io.containerd.cri.v1.runtime\'.containerd.runtimes.runc.options]\n    SystemdCgroup = false'
  fi
  "$KIND" create cluster --name "$KIND_CLUSTER" --image "$kind_image" --kubeconfig "$KIND_KUBECONFIG" \
    --wait 5m --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
$containerd_patches
networking:
  podSubnet: $pod_cidr
  serviceSubnet: $service_cidr
nodes:
- role: control-plane$node_mounts
$(for ((i = 0; i < KIND_WORKERS; i++)); do echo "- role: worker$node_mounts"; done)
EOF
fi
"$KIND" get kubeconfig --name "$KIND_CLUSTER" >"$KIND_KUBECONFIG"
mapfile -t nodes < <("$KIND" get nodes --name "$KIND_CLUSTER")
if ((${#nodes[@]} > 1)); then
  # The node image's pod network is one static ptp range, enough for one node. With
  # several, each node takes the range kube-controller-manager gave it, pods keep their
  # own addresses between nodes (no masquerading inside the pod network, so
  # NetworkPolicies see the real source), and kube-router's router (off on one node)
  # exchanges the ranges' routes over BGP, follows a node whose address a restart
  # changed, and masquerades pod egress out of the cluster. kind taints the
  # control-plane node when there are workers; here every node runs VMs.
  step "pod network across ${#nodes[@]} nodes"
  kubectl taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule- 2>/dev/null || true
  for node in "${nodes[@]}"; do
    use_pod_range "$node" || die "node $node has no IPv4 pod range"
  done
  kubectl -n kube-system patch ds kube-router --type=json -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/args",
    "value": ["--run-router=true", "--enable-cni=false", "--run-firewall=true", "--run-service-proxy=false", "--health-port=20244"]}]'
  kubectl -n kube-system rollout status ds/kube-router --timeout=5m
fi
# KubeVirt's bridge binding, which knest's VMs use so the guest owns its pod's IP, moves
# that IP to a dummy link in the launcher pod; kernels built without the dummy driver
# refuse it ("LinkAdd: operation not supported") and no knest VM gets a network. There
# the images carry the eth0-bridge virt-handler (hack/kubevirt-handler-bridge.sh). The
# node is privileged and shares the host's kernel, so it can tell.
handler=$(cat "$KUBEVIRT_IMAGES_DIR/virt-handler") || die "$KUBEVIRT_IMAGES_DIR/virt-handler missing: make kubevirt-images"
if ! "$KIND_ENGINE" exec "${nodes[0]}" sh -c 'ip link add knest-probe0 type dummy && ip link del knest-probe0' 2>/dev/null &&
  [[ $handler != eth0-bridge ]]; then
  die "this kernel has no dummy network driver and $KUBEVIRT_IMAGES_DIR has upstream's virt-handler: build it with VIRT_HANDLER_VARIANT=eth0-bridge (docs/e2e.md)"
fi
step "virt-handler: $handler"
# The node's network fixes for KubeVirt's VMs (proxy ARP, Service addresses kube-proxy
# has not translated refused; the script says why), as a unit that runs them again at
# every boot of the node: they live in its network namespace, which a restart makes anew.
for node in "${nodes[@]}"; do
  "$KIND_ENGINE" cp hack/kind/node/knest-host-net "$node:/usr/local/sbin/knest-host-net"
  "$KIND_ENGINE" cp hack/kind/node/knest-host-net.service "$node:/etc/systemd/system/knest-host-net.service"
  "$KIND_ENGINE" exec "$node" sh -c "echo SERVICE_CIDR=$service_cidr >/etc/default/knest-host-net &&
    systemctl daemon-reload && systemctl enable knest-host-net.service && systemctl restart knest-host-net.service"
done

step "images: Cluster API, CAPK and knest managers, cluster-autoscaler $AUTOSCALER_VERSION, MetalLB $METALLB_VERSION"
# knest's image is tagged by its binary's digest, so a rebuilt controller rolls out.
CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/knest" ./cmd/knest
# The host's default StorageClass (below), from its module.
(cd hack/tools/kind/localpath && CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/local-path-provisioner" github.com/rancher/local-path-provisioner)
localpath_dir=$(cd hack/tools/kind/localpath && "$GO" list -m -f '{{.Dir}}' github.com/rancher/local-path-provisioner)
localpath_version=$(cd hack/tools/kind/localpath && "$GO" list -m -f '{{.Version}}' github.com/rancher/local-path-provisioner)
knest_tag=dev-$(sha256sum "$tmp/knest" | cut -c1-12)
# knest's CSI driver, whose controller the knest controller runs per tenant beside the
# upstream sidecars (make csi-sidecars); the references are pkg/csi/deploy/deploy.go's,
# and the image is the one images/build.sh preloads in the node image (same spec).
CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/knest-csi" ./cmd/knest-csi
csi_ref() { sed -n 's/^\s*'"$1"'\s*=\s*"\(.*\)"$/\1/p' pkg/csi/deploy/deploy.go; }
for f in "${CSI_PROVISIONER:?}" "${CSI_ATTACHER:?}"; do [[ -e $f ]] || die "$f missing: make csi-sidecars"; done
manager() { # ref, binary
  printf '{"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/manager", "mode": "0755"}]}], "entrypoint": ["/manager"], "user": "65532:65532"},\n' "$1" "$2"
}
{
  echo '{"images": ['
  manager "knest.local/cluster-api-controller:$CAPI_VERSION" "$PROVIDERS_DIR/cluster-api-manager"
  manager "knest.local/kubeadm-bootstrap-controller:$CAPI_VERSION" "$PROVIDERS_DIR/kubeadm-bootstrap-manager"
  manager "knest.local/kubeadm-control-plane-controller:$CAPI_VERSION" "$PROVIDERS_DIR/kubeadm-control-plane-manager"
  manager "knest.local/capk-manager:$CAPK_VERSION" "$PROVIDERS_DIR/capk-manager"
  # What knest's controller runs for each tenant with autoscaled pools (make autoscaler;
  # upstream's image has /cluster-autoscaler too).
  printf '{"ref": "knest.local/cluster-autoscaler:%s", "layers": [{"files": [{"src": "%s", "dst": "/cluster-autoscaler", "mode": "0755"}]}], "entrypoint": ["/cluster-autoscaler"], "user": "65532:65532"},\n' \
    "$AUTOSCALER_VERSION" "$AUTOSCALER_DIR/cluster-autoscaler"
  printf '{"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/knest-csi", "mode": "0755"}]}], "entrypoint": ["/knest-csi"]},\n' "$(csi_ref DefaultImage)" "$tmp/knest-csi"
  # As upstream's images: the binary at /, the entrypoint; the Deployment sets the uid.
  printf '{"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/csi-provisioner", "mode": "0755"}]}], "entrypoint": ["/csi-provisioner"]},\n' \
    "$(csi_ref DefaultProvisionerImage)" "$CSI_PROVISIONER"
  printf '{"ref": "%s", "layers": [{"files": [{"src": "%s", "dst": "/csi-attacher", "mode": "0755"}]}], "entrypoint": ["/csi-attacher"]},\n' \
    "$(csi_ref DefaultAttacherImage)" "$CSI_ATTACHER"
  printf '{"ref": "knest.local/local-path-provisioner:%s", "layers": [{"files": [{"src": "%s", "dst": "/usr/local/bin/local-path-provisioner", "mode": "0755"}]}], "env": ["PATH=/usr/local/bin"]},\n' \
    "$localpath_version" "$tmp/local-path-provisioner"
  # MetalLB (make metallb): upstream's images are distroless/static with the binary at
  # the root and no user (its manifest sets the controller's); the speaker's FRR tools
  # serve only its FRR mode.
  for c in controller speaker; do
    printf '{"ref": "knest.local/metallb-%s:%s", "layers": [{"files": [{"src": "%s", "dst": "/%s", "mode": "0755"}]}], "entrypoint": ["/%s"]},\n' \
      "$c" "$METALLB_VERSION" "$METALLB_DIR/$c" "$c" "$c"
  done
  # What the Dockerfile builds: /knest as uid 65532 (config/manager checks runAsNonRoot).
  printf '{"ref": "knest.local/knest:%s", "layers": [{"files": [{"src": "%s", "dst": "/knest", "mode": "0755"}]}], "entrypoint": ["/knest"], "user": "65532:65532"}\n' "$knest_tag" "$tmp/knest"
  echo ']}'
} >"$tmp/components.json"
(cd images/tools && "$GO" run ./cmd/ociimage containers -spec "$tmp/components.json" -out "$tmp/components.tar")

# The hosted archive of the kind node's own version holds its control plane's images
# again, built alike: same digests, so the running ones are unaffected.
step "loading images into the node (tenant node and hosted control-plane images $NODE_IMAGE_VERSIONS, KubeVirt, managers, cluster-autoscaler)"
for archive in "${node_images[@]}" "${hosted_images[@]}" "$KUBEVIRT_IMAGES_DIR/kubevirt-images.tar" "$tmp/components.tar"; do
  "$KIND" load image-archive "$archive" --name "$KIND_CLUSTER"
done
# An OCI archive names Docker Hub images index.docker.io/...; the CRI looks them up
# as docker.io/... .
for node in "${nodes[@]}"; do
  "$KIND_ENGINE" exec "$node" sh -c 'ctr -n k8s.io images ls -q | grep "^index\.docker\.io/" |
    while read -r ref; do ctr -n k8s.io images tag --force "$ref" "docker.io/${ref#index.docker.io/}" >/dev/null; done'
done

# kind's own default class is kube-controller-manager's host-path provisioner, whose
# volumes live under the node's /tmp, a tmpfs: a node restart lost every hosted etcd.
# local-path-provisioner (upstream's manifest with this host's images and a path on
# the node's /var, kind's volume that outlives the node container) takes its place.
# Its helper pod (mkdir, rm) runs in the kubeadm image, which has busybox. The helper
# pod's time (2 minutes by default) follows the host's slowdown: a host starting ten
# hosted tenants at once took longer than 2 minutes to start one, and each retry
# starts a new one (make bench-density).
localpath_timeout=$((120 * KNEST_HOST_SLOWDOWN))
#
# The same provisioner serves the class knest-shared from /var/knest-shared, one
# directory of this machine mounted into every node (KIND_SHARED_DIR): its volumes
# have no node affinity, so a tenant volume there follows its VM to any node, as on a
# host with network storage. A host made before that mount existed gets no such class.
shared_class=', "knest-shared": {"sharedFileSystemPath": "/var/knest-shared"}'
for node in "${nodes[@]}"; do
  "$KIND_ENGINE" exec "$node" mountpoint -q /var/knest-shared || { shared_class="" && break; }
done
step "default StorageClass: local-path-provisioner $localpath_version on /var/local-path-provisioner (helper pods: ${localpath_timeout}s)${shared_class:+; knest-shared on $KIND_SHARED_DIR}"
localpath_config="{\"cmdTimeoutSeconds\": $localpath_timeout, \"storageClassConfigs\": {\"local-path\": {\"nodePathMap\": [{\"node\": \"DEFAULT_PATH_FOR_NON_LISTED_NODES\", \"paths\": [\"/var/local-path-provisioner\"]}]}$shared_class}}"
# upstream's config.json (up to its setup script) replaced by the one above.
awk -v config="$localpath_config" '
  /^  config.json: \|-$/ { print; print "    " config; skip = 1; next }
  /^  setup: / { skip = 0 }
  !skip' "$localpath_dir/deploy/local-path-storage.yaml" |
  sed -e "s#image: rancher/local-path-provisioner:.*#image: knest.local/local-path-provisioner:$localpath_version#" \
    -e "s#image: busybox#image: knest.local/kubeadm:$NODE_KUBE_VERSION#" |
  kubectl apply --server-side --force-conflicts -f -
if [[ -n $shared_class ]]; then
  kubectl apply --server-side -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: knest-shared}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
fi
kubectl annotate --overwrite storageclass standard storageclass.kubernetes.io/is-default-class=false
kubectl annotate --overwrite storageclass local-path storageclass.kubernetes.io/is-default-class=true
kubectl -n local-path-storage rollout status deploy/local-path-provisioner --timeout=5m

# LoadBalancer Services (a tenant's API endpoint or its own LoadBalancers): MetalLB in
# L2 mode, upstream's native manifest with this host's images, answering ARP on the
# container engine's network for addresses at its top: the top /27 unless
# METALLB_ADDRESSES says. The engine's IPAM gives containers addresses counting up
# from the bottom (podman round-robin: its counter per network wraps at the top), so it
# reaches them only after about 200 containers on the network; a node there stops this.
metallb_manifest=$(cd hack/tools/kind/metallb && "$GO" list -m -f '{{.Dir}}' go.universe.tf/metallb)/config/manifests/metallb-native.yaml
if [[ -z $METALLB_ADDRESSES ]]; then
  node_cidr=$("$KIND_ENGINE" exec "${nodes[0]}" ip -4 -o addr show dev eth0 | awk '{print $4; exit}')
  [[ $node_cidr =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)/([0-9]+)$ ]] || die "no IPv4 address on ${nodes[0]}'s eth0 ($node_cidr)"
  ((BASH_REMATCH[5] <= 26)) || die "the kind network $node_cidr is too small for a /27 of LoadBalancer addresses: set METALLB_ADDRESSES"
  ip_int=$(((BASH_REMATCH[1] << 24) | (BASH_REMATCH[2] << 16) | (BASH_REMATCH[3] << 8) | BASH_REMATCH[4]))
  last=$((ip_int | ((1 << (32 - BASH_REMATCH[5])) - 1)))
  dotted() { echo "$(($1 >> 24 & 255)).$(($1 >> 16 & 255)).$(($1 >> 8 & 255)).$(($1 & 255))"; }
  # Not the broadcast address.
  METALLB_ADDRESSES=$(dotted $((last - 31)))-$(dotted $((last - 1)))
  ((ip_int < last - 31)) || die "${nodes[0]}'s address $node_cidr is in the LoadBalancer range $METALLB_ADDRESSES: set METALLB_ADDRESSES"
fi
step "LoadBalancers: MetalLB $METALLB_VERSION (L2) on $METALLB_ADDRESSES"
# Its pods request no CPU, so beside emulated VMs they starve like the Cluster API
# managers (below): with two emulated workers the speaker failed its 1-second liveness
# probe ten times in 50 minutes, and each restart withdrew the LoadBalancer addresses
# it announces. Their probes get 5 s and a minute of failures. No CPU request: a host
# whose VMs have taken every core by requests could then not place the speaker again.
# slow_probes patches a workload's first container: 5-second probes, and a minute of
# failed liveness probes before a restart.
slow_probes="    - {op: add, path: /spec/template/spec/containers/0/livenessProbe/timeoutSeconds, value: 5}
    - {op: add, path: /spec/template/spec/containers/0/livenessProbe/failureThreshold, value: 6}
    - {op: add, path: /spec/template/spec/containers/0/readinessProbe/timeoutSeconds, value: 5}"
mkdir -p "$tmp/metallb"
sed -e "s#image: quay.io/metallb/controller:.*#image: knest.local/metallb-controller:$METALLB_VERSION#" \
  -e "s#image: quay.io/metallb/speaker:.*#image: knest.local/metallb-speaker:$METALLB_VERSION#" \
  "$metallb_manifest" >"$tmp/metallb/metallb-native.yaml"
cat >"$tmp/metallb/kustomization.yaml" <<EOF
resources: [metallb-native.yaml]
patches:
- target: {kind: Deployment|DaemonSet, namespace: metallb-system, name: controller|speaker}
  patch: |-
$slow_probes
EOF
kubectl kustomize "$tmp/metallb" | kubectl apply --server-side --force-conflicts -f -
kubectl -n metallb-system rollout status deploy/controller --timeout=5m
kubectl -n metallb-system rollout status ds/speaker --timeout=5m
# The pool's validating webhook answers once the controller has made its certificate.
end=$((SECONDS + 120))
until kubectl apply --server-side --force-conflicts -f - <<EOF; do
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: kind, namespace: metallb-system}
spec:
  addresses: [$METALLB_ADDRESSES]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: kind, namespace: metallb-system}
spec:
  ipAddressPools: [kind]
EOF
  ((SECONDS < end)) || die "MetalLB's webhook did not accept the address pool"
  sleep 5
done

step "KubeVirt $KUBEVIRT_VERSION (useEmulation: $emulation, feature gate HotplugVolumes)"
# KubeVirt requires its operator, virt-api and virt-controller on control-plane nodes.
# The kind host has one, so a drain of it could not move them: with several nodes
# they may run on any (below, the CR's infra.nodePlacement: {}).
mkdir -p "$tmp/kubevirt"
cp "$KUBEVIRT_IMAGES_DIR/kubevirt-operator.yaml" "$tmp/kubevirt/"
{
  echo "resources: [kubevirt-operator.yaml]"
  if ((KIND_WORKERS > 0)); then
    cat <<EOF
patches:
- target: {kind: Deployment, name: virt-operator}
  patch: |-
    - {op: remove, path: /spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution}
EOF
  fi
} >"$tmp/kubevirt/kustomization.yaml"
kubectl kustomize "$tmp/kubevirt" | kubectl apply --server-side --force-conflicts -f -
wait_for 120 Established crd/kubevirts.kubevirt.io
# One node: one replica of each host component is enough, and two cores' worth of CPU
# requests must hold three tenant VMs beside them. Measured with a control plane and
# two workers at --cpu-allocation-ratio=4: the host's pods requested 1005m, the VMs
# 1006m, 11m too many; one replica of virt-api and virt-controller (the CR's
# infra.replicas), virt-operator and CoreDNS free 120m. Several nodes: two of
# virt-api (KubeVirt then gives them a PodDisruptionBudget) and of CoreDNS, as
# KubeVirt and kubeadm have it. With one virt-api, a drain of its node evicted it and
# then failed on the launcher pods: their eviction webhook is virt-api, and `kubectl
# drain` stops at any error but 429 ("connection refused", 2026-12-01).
infra="{replicas: 1}"
((KIND_WORKERS == 0)) || infra="{replicas: 2, nodePlacement: {}}"
kubectl -n kubevirt scale deploy/virt-operator --replicas=1
kubectl -n kube-system scale deploy/coredns --replicas=$((KIND_WORKERS > 0 ? 2 : 1))
kubectl -n kubevirt rollout status deploy/virt-operator --timeout=10m
kubectl apply --server-side -f - <<EOF
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  imagePullPolicy: IfNotPresent
  infra: $infra
  configuration:
    developerConfiguration:
      useEmulation: $emulation
      # The VMI's addvolume/removevolume subresources with a plain PVC: tenant storage
      # (a CSI driver in the tenant attaching host PVCs to its node VMs).
      featureGates: [HotplugVolumes]
EOF

step "Cluster API $CAPI_VERSION, CAPK $CAPK_VERSION"
# The release manifests' managers request no CPU, so on a host whose cores the VMs
# fill they are BestEffort (cgroup v1 cpu.shares 2 against the VMs' ~1000): during an
# upgrade with three emulated VMs each was killed 6–10 times by its 1-second liveness
# probe or lost its 10-second lease renewal, stalling the rollout for minutes. Here
# they request 10m (as KubeVirt's own controllers do), their probes get 5 s and a
# minute of failures, and their leases the timings KCP already defaults to (60/40/5 s).
mkdir -p "$tmp/providers"
cp "$PROVIDERS_INSTALL/components.yaml" "$tmp/providers/"
cat >"$tmp/providers/kustomization.yaml" <<EOF
resources: [components.yaml]
patches:
- target: {kind: Deployment}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --leader-elect-lease-duration=60s}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --leader-elect-renew-deadline=40s}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --leader-elect-retry-period=5s}
    - {op: add, path: /spec/template/spec/containers/0/resources/requests, value: {cpu: 10m}}
$slow_probes
EOF
# CRDs first, so the objects of their kinds in the same file are known.
kubectl kustomize "$tmp/providers" | kubectl apply --server-side --force-conflicts -f -
# clusterctl's inventory, so clusterctl (describe, move, upgrade) knows the providers.
wait_for 120 Established crd/providers.clusterctl.cluster.x-k8s.io
kubectl apply --server-side --force-conflicts -f "$PROVIDERS_INSTALL/inventory.yaml"
for ns_deploy in capi-system/capi-controller-manager capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager \
  capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager capk-system/capk-controller-manager; do
  kubectl -n "${ns_deploy%/*}" rollout status "deploy/${ns_deploy#*/}" --timeout=10m
done

# knest's controller watches VirtualMachineInstances and exits while their kind is
# unknown; virt-operator creates KubeVirt's CRDs early in its install, well before
# KubeVirt is Available, so waiting for this one costs seconds, not restarts.
wait_for 600 Established crd/virtualmachineinstances.kubevirt.io

step "knest controller: kubectl apply -k config/default (knest.local/knest:$knest_tag, --cpu-allocation-ratio=$KNEST_CPU_ALLOCATION_RATIO --node-startup-timeout=$KNEST_NODE_STARTUP_TIMEOUT --host-slowdown=$KNEST_HOST_SLOWDOWN)"
# config/default with that image, through an overlay in a copy of config/.
cp -R config "$tmp/config"
mkdir -p "$tmp/config/kind"
cat >"$tmp/config/kind/kustomization.yaml" <<EOF
resources: [../default]
images: [{name: knest, newName: knest.local/knest, newTag: $knest_tag}]
patches:
- target: {kind: Deployment, name: knest-controller}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --cpu-allocation-ratio=$KNEST_CPU_ALLOCATION_RATIO}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --node-startup-timeout=$KNEST_NODE_STARTUP_TIMEOUT}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --host-slowdown=$KNEST_HOST_SLOWDOWN}
EOF
kubectl apply -k "$tmp/config/kind"
kubectl -n knest-system rollout status deploy/knest-controller --timeout=5m
kubectl -n knest-system rollout status deploy/knest-guest-dns --timeout=5m
# knest makes tenants only in namespaces a host admin enabled; here, `default` (make demo's).
kubectl label namespace default knest.dev/tenants=true --overwrite

step "waiting for KubeVirt to be available"
wait_for 1200 Available kubevirt/kubevirt -n kubevirt

step "ready: source $KIND_ENV_FILE"
tee "$KIND_ENV_FILE" <<EOF
export KUBECONFIG=$KIND_KUBECONFIG
export KNEST_E2E_HOST_KUBECONFIG=$KIND_KUBECONFIG
export KNEST_E2E_NODE_IMAGE=$NODE_IMAGE_REF
export KNEST_E2E_KERNEL_IMAGE=$KERNEL_IMAGE_REF
export KNEST_E2E_ACCEL=$accel
export KNEST_KIND_VIRT_HANDLER=$handler
export KNEST_E2E_KIND_ENGINE=$KIND_ENGINE
export KNEST_E2E_KIND_NODES="${nodes[*]}"
EOF
