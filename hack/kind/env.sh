# shellcheck shell=bash disable=SC2034
# Settings shared by up.sh and down.sh. hack/kind.mk passes the Makefile's versions and
# paths; these defaults let the scripts run on their own (from any directory).

KNEST_CACHE=${KNEST_CACHE:-$HOME/.cache/knest}
GO=${GO:-go}

KIND_CLUSTER=${KIND_CLUSTER:-knest-e2e}
KIND_KUBECONFIG=${KIND_KUBECONFIG:-$KNEST_CACHE/kind/$KIND_CLUSTER.kubeconfig}
# kind, built from the module hack/tools/kind/kind pins (make kind-tools).
KIND=${KIND:-$KNEST_CACHE/kind/bin/kind}
# docker or podman; empty picks docker when its engine answers, else podman.
KIND_ENGINE=${KIND_ENGINE:-}
# Worker nodes beside the control-plane node (0: one node, which runs everything). Each
# node runs VMs, holds local-path volumes and answers for MetalLB; with workers the pod
# network routes each node's pod range through kube-router (up.sh).
KIND_WORKERS=${KIND_WORKERS:-0}
# A directory of this machine mounted into every node at /var/knest-shared: the
# StorageClass knest-shared keeps its volumes there, reachable from every node, as
# NFS or CephFS is on a real host (up.sh).
KIND_SHARED_DIR=${KIND_SHARED_DIR:-$KNEST_CACHE/kind/$KIND_CLUSTER-shared}

KUBEVIRT_VERSION=${KUBEVIRT_VERSION:-v1.7.0}
CAPI_VERSION=${CAPI_VERSION:-v1.13.6}
CAPK_VERSION=${CAPK_VERSION:-v0.11.2}

# What make builds offline: the tenant node image (make node-image), the kind node
# (make kind-node-image), KubeVirt's images and operator manifest (make
# kubevirt-images), the provider managers (make providers) and their install manifests.
NODE_KUBE_VERSION=${NODE_KUBE_VERSION:-v1.35.4}
# The tenant versions whose node images up.sh loads, separated by spaces; it must
# include NODE_KUBE_VERSION, the one the env file names. make e2e-upgrade passes every
# version of NODE_KUBE_VERSIONS (images/node-image.mk).
NODE_IMAGE_VERSIONS=${NODE_IMAGE_VERSIONS:-$NODE_KUBE_VERSION}
# Each version's node images are in $NODE_IMAGES_DIR/<version> (make node-image, make
# node-images).
NODE_IMAGES_DIR=${NODE_IMAGES_DIR:-$KNEST_CACHE/node-image/out}
# The kind host itself stays at v1.34 (kubelet v1.35+ refuses cgroup v1 hosts).
KIND_KUBE_VERSION=${KIND_KUBE_VERSION:-v1.34.4}
KIND_NODE_DIR=${KIND_NODE_DIR:-$KNEST_CACHE/node-image/kind/$KIND_KUBE_VERSION}
KUBE_BIN_DIR=${KUBE_BIN_DIR:-$KNEST_CACHE/node-image/kube/$KIND_KUBE_VERSION}
KUBEVIRT_DIR=${KUBEVIRT_DIR:-$KNEST_CACHE/kubevirt/$KUBEVIRT_VERSION}
# KubeVirt's images with upstream's virt-handler or the eth0-bridge one (hack/kubevirt.mk).
KUBEVIRT_IMAGES_DIR=${KUBEVIRT_IMAGES_DIR:-$KUBEVIRT_DIR/images/eth0-bridge}
PROVIDERS_DIR=${PROVIDERS_DIR:-$KNEST_CACHE/providers/capi-$CAPI_VERSION-capk-$CAPK_VERSION}
PROVIDERS_INSTALL=${PROVIDERS_INSTALL:-$PROVIDERS_DIR/install}
# The cluster-autoscaler (make autoscaler), loaded as knest.local/cluster-autoscaler:$AUTOSCALER_VERSION.
AUTOSCALER_VERSION=${AUTOSCALER_VERSION:-v1.33.0-1959f5f61f6c}
AUTOSCALER_DIR=${AUTOSCALER_DIR:-$KNEST_CACHE/autoscaler/$AUTOSCALER_VERSION}
# MetalLB's controller and speaker (make metallb), loaded as
# knest.local/metallb-{controller,speaker}:$METALLB_VERSION.
METALLB_VERSION=${METALLB_VERSION:-v0.16.2}
METALLB_DIR=${METALLB_DIR:-$KNEST_CACHE/metallb/$METALLB_VERSION}
# MetalLB's LoadBalancer addresses (a range or CIDR on the kind network); empty: the top
# /27 of the kind node's network, which the container engine does not hand out.
METALLB_ADDRESSES=${METALLB_ADDRESSES:-}
# Host CPU overcommit of tenant VMs (knest controller --cpu-allocation-ratio): a
# control plane of 2 vCPUs and two workers of 1 do not fit a 2-core host otherwise.
KNEST_CPU_ALLOCATION_RATIO=${KNEST_CPU_ALLOCATION_RATIO:-4}
# How long a machine may take to become a Ready node before its health check replaces
# it (knest controller --node-startup-timeout, default 20m). Under emulation on 2 cores
# a worker took 3-9 minutes here, and 16-22 on the retired stand-in: kept generous for
# slower or busier hosts.
KNEST_NODE_STARTUP_TIMEOUT=${KNEST_NODE_STARTUP_TIMEOUT:-40m}
# How many times slower than hardware speed the host runs VMs (knest controller
# --host-slowdown, which multiplies kubeadm's timeouts); empty: up.sh chooses from its
# KVM probe, 3 under emulation (guests here boot 2-3 times slower than under KVM, more
# on a slower machine of this kind), 1 under KVM.
KNEST_HOST_SLOWDOWN=${KNEST_HOST_SLOWDOWN:-}
# The tenant nodes' images as the host's containerd names them once loaded.
NODE_IMAGE_REF=${NODE_IMAGE_REF:-docker.io/knest/node:$NODE_KUBE_VERSION}
KERNEL_IMAGE_REF=${KERNEL_IMAGE_REF:-docker.io/knest/node-kernel:$NODE_KUBE_VERSION}

# What up.sh writes last for the e2e suite and kubectl: KUBECONFIG,
# KNEST_E2E_HOST_KUBECONFIG, KNEST_E2E_NODE_IMAGE, KNEST_E2E_KERNEL_IMAGE.
KIND_ENV_FILE=${KIND_ENV_FILE:-$KNEST_CACHE/kind/$KIND_CLUSTER.env}

# The container engine kind drives. podman needs three settings on hosts like the
# build machines (no CAP_SYS_RESOURCE, crun refusing a hybrid cgroup layout, and no
# limit of 2048 processes per container: ten hosted tenants' threads reached it, and
# runc then failed to start containers); they go in a containers.conf of our own, not
# /etc, written anew when these settings change.
kind_engine() {
  if [[ -z $KIND_ENGINE ]]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then KIND_ENGINE=docker; else KIND_ENGINE=podman; fi
  fi
  if [[ $KIND_ENGINE == podman ]]; then
    export KIND_EXPERIMENTAL_PROVIDER=podman
    export CONTAINERS_CONF=${CONTAINERS_CONF:-$KNEST_CACHE/kind/containers.conf}
    local conf='[containers]\ndefault_ulimits = []\npids_limit = 0\n\n[engine]\nruntime = "runc"\n'
    if [[ "$(cat "$CONTAINERS_CONF" 2>/dev/null)" != "$(printf "$conf")" ]]; then
      mkdir -p "$(dirname "$CONTAINERS_CONF")"
      printf "$conf" >"$CONTAINERS_CONF"
    fi
  fi
}

# use_pod_range NODE gives kind node NODE's pod network (the node image's static ptp
# configuration) the range kube-controller-manager gave it, and deletes the node's pods
# whose address is outside it, which then start again inside. up.sh does this for each
# node of a host of several; a node whose Node object was deleted and made again has a
# new range, and needs it again. Fails when the node has no IPv4 range.
use_pod_range() {
  local node=$1 range net bits
  local k=("$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG")
  ip_int() { local IFS=.; set -- $1; echo $((($1 << 24) | ($2 << 16) | ($3 << 8) | $4)); }
  range=$("${k[@]}" get node "$node" -o jsonpath='{.spec.podCIDR}')
  [[ $range =~ ^([0-9.]+)/([0-9]+)$ ]] || return 1
  net=$(ip_int "${BASH_REMATCH[1]}") bits=${BASH_REMATCH[2]}
  "$KIND_ENGINE" exec "$node" sed -i -e "s#\"subnet\": \"[0-9./]*\"#\"subnet\": \"$range\"#" \
    -e 's#"ipMasq": true#"ipMasq": false#' /etc/cni/net.d/10-knest-ptp.conflist
  "${k[@]}" get pods -A --field-selector "spec.nodeName=$node" \
    -o go-template='{{range .items}}{{if not .spec.hostNetwork}}{{if .status.podIP}}{{.metadata.namespace}} {{.metadata.name}} {{.status.podIP}}{{"\n"}}{{end}}{{end}}{{end}}' |
    while read -r ns pod ip; do
      (((($(ip_int "$ip") ^ net) >> (32 - bits)) == 0)) || "${k[@]}" -n "$ns" delete pod "$pod" --wait=false
    done
}

# tenant_kubeconfig NAME FILE writes the admin kubeconfig of tenant NAME (namespace
# default) with the LoadBalancer address of its API Service (knest's for a hosted
# control plane, CAPK's for a VM one): it reaches the tenant from this machine and
# outlives a host node's restart or drain. Needs KNEST (the CLI).
tenant_kubeconfig() {
  local name=$1 out=$2 svc address port
  local hk=("$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" -n default)
  svc=$name-lb
  "${hk[@]}" get service "$name-apiserver" >/dev/null 2>&1 && svc=$name-apiserver
  address=$("${hk[@]}" get service "$svc" -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
  port=$("${hk[@]}" get service "$svc" -o jsonpath='{.spec.ports[0].port}')
  if [[ -z $address ]]; then
    echo "Service $svc has no LoadBalancer address" >&2
    return 1
  fi
  "$KNEST" --kubeconfig "$KIND_KUBECONFIG" kubeconfig "$name" --server "https://$address:$port" --output-file "$out"
}
