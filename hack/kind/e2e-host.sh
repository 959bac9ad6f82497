#!/usr/bin/env bash
# `make e2e-host`, after hack/kind/up.sh with KIND_WORKERS=2: a hosted tenant with
# three API servers, three etcd members and one worker, spread over the three nodes;
# then the host node that runs the worker VM is drained and, once the tenant is whole
# again, drained a second time (hack/kind/drain.sh measures each). It fails if a drain
# does not complete, the tenant is not whole again (a replaced etcd member, the worker
# back and uncordoned) or loses the ConfigMap written before.
#
# Settings: hack/kind/env.sh, KNEST (the CLI), E2E_HOST_CLUSTER (the tenant, default
# e2e-host; kept if it exists).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

KNEST=${KNEST:-bin/knest}
name=${E2E_HOST_CLUSTER:-e2e-host}
hk() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { echo "e2e-host: $*" >&2; exit 1; }

(($(hk get nodes -o name | wc -l) >= 3)) || die "the kind host has fewer than 3 nodes: make kind-up KIND_WORKERS=2"
if ! "$KNEST" --kubeconfig "$KIND_KUBECONFIG" get "$name" >/dev/null 2>&1; then
  log "creating tenant $name: hosted, 3 API servers, 3 etcd members, 1 worker"
  start=$SECONDS
  "$KNEST" --kubeconfig "$KIND_KUBECONFIG" create -f - --timeout 60m <<EOF
apiVersion: knest.dev/v1alpha1
kind: NestedCluster
metadata: {name: $name, namespace: default}
spec:
  apiServer: {serviceType: LoadBalancer}
  controlPlane: {mode: Hosted, replicas: 3, etcd: {members: 3}}
  workers:
  - {name: workers, replicas: 1}
EOF
  log "tenant Ready in $((SECONDS - start)) s"
fi
hk -n default get pods -o wide -l "cluster.x-k8s.io/cluster-name=$name" --no-headers |
  awk '{print "  " $1 " on " $7}'

vm_node() {
  hk -n default get vmi -l "cluster.x-k8s.io/cluster-name=$name" -o jsonpath='{.items[0].status.nodeName}'
}
first=$(vm_node)
[[ -n $first ]] || die "no worker VM of $name runs"
KNEST=$KNEST hack/kind/drain.sh "$name" "$first"
second=$(vm_node)
[[ -n $second && $second != "$first" ]] || die "the worker VM did not move off $first (on '${second:-nothing}')"
log "the worker VM moved from $first to $second; draining $second"
KNEST=$KNEST hack/kind/drain.sh "$name" "$second"
log "both drains passed"
