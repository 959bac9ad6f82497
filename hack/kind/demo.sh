#!/usr/bin/env bash
# `make demo` after hack/kind/up.sh: creates NestedCluster demo (1 control plane + 1
# worker) on the kind host with the knest CLI, exposes its API as a NodePort of the kind
# node so that it is reachable from this machine, writes a kubeconfig that works from
# here, waits for its storage and load-balancer providers and prints the tenant's
# nodes and StorageClasses. Running it again on an existing demo only writes
# the kubeconfig and prints. Settings: hack/kind/env.sh; DEMO_DIR, KNEST (the CLI).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

DEMO_DIR=${DEMO_DIR:-$KNEST_CACHE/demo}
KNEST=${KNEST:-bin/knest}
# The tenant's own version of kubectl, from its node image build.
TENANT_KUBECTL=${TENANT_KUBECTL:-$KNEST_CACHE/node-image/kube/$NODE_KUBE_VERSION/kubectl}
mkdir -p "$DEMO_DIR"
knest() { "$KNEST" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
kubectl() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }

if knest get demo >/dev/null 2>&1; then
  echo "NestedCluster demo exists already:"
  knest get demo
else
  # Sized for a 2-core host: the control plane needs 2 vCPUs (kubeadm's preflight).
  knest create demo --worker-cpu 1 --worker-memory 2Gi --control-plane-memory 3Gi \
    --service-type NodePort --timeout 60m
fi

node_ip=$(kubectl get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')
node_port=$(kubectl -n default get service demo-lb -o jsonpath='{.spec.ports[0].nodePort}')
kc=$DEMO_DIR/demo.kubeconfig
knest kubeconfig demo --server "https://$node_ip:$node_port" --output-file "$kc"
# The providers every tenant has by default: volumes and load balancers.
for c in StorageReady LoadBalancerReady; do
  kubectl -n default wait nestedcluster/demo --for=condition=$c --timeout 10m >/dev/null
done
"$TENANT_KUBECTL" --kubeconfig "$kc" get nodes -o wide
"$TENANT_KUBECTL" --kubeconfig "$kc" get storageclass
cat <<EOF

Tenant:  $TENANT_KUBECTL --kubeconfig $kc get pods -A
         (a PersistentVolumeClaim binds to the default class knest; a Service of type
         LoadBalancer gets an address from the host's MetalLB, reachable from here)
Host:    $KNEST --kubeconfig $KIND_KUBECONFIG get demo
         $KUBE_BIN_DIR/kubectl --kubeconfig $KIND_KUBECONFIG get vmi -A
Stop everything: make demo-down
EOF
