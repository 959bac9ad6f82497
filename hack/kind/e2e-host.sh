#!/usr/bin/env bash
# `make e2e-host`, after hack/kind/up.sh with KIND_WORKERS=2: a hosted tenant with
# three API servers, three etcd members and two workers (E2E_HOST_WORKERS), spread
# over the three nodes,
# running two apps behind LoadBalancer Services: web (two replicas, a
# PodDisruptionBudget of one) and data (its page on a volume of the host's class
# knest-shared, reachable from every node, as network storage is on a real host; a
# hosted etcd stays on node-local volumes). Then, each measured by hack/kind/disrupt.sh
# while the apps and the tenant's API are polled: the host node of a worker VM is
# drained; once the tenant is whole again, the node that VM moved to is drained; then a
# worker node holding a worker VM is lost (its container stopped, its Node deleted) and
# brought back. It fails if a step does not complete, the tenant is not whole again (a
# replaced etcd member, its workers back, Ready and schedulable, the apps answering) or
# loses the ConfigMap written before or the data app's page.
#
# E2E_HOST_CONTROL_PLANE=vm makes the tenant's control plane one VM instead (its etcd
# disk on knest-shared), and the first drain takes the node of that VM: the VM goes
# through CAPK's drain, starts again on another node with its etcd disk, and the
# tenant's API comes back with every object.
#
# Settings: hack/kind/env.sh, KNEST (the CLI), E2E_HOST_CLUSTER (the tenant, default
# e2e-host; kept if it exists), E2E_HOST_CONTROL_PLANE (hosted, the default, or vm),
# E2E_HOST_WORKERS (default 2), E2E_HOST_STEPS (default "drain drain lose"; with
# a VM control plane "drain").
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

KNEST=${KNEST:-bin/knest}
name=${E2E_HOST_CLUSTER:-e2e-host}
workers=${E2E_HOST_WORKERS:-2}
mode=${E2E_HOST_CONTROL_PLANE:-hosted}
case $mode in
hosted) control_plane_spec='{mode: Hosted, replicas: 3, etcd: {members: 3}}' what='3 API servers, 3 etcd members' ;;
vm) control_plane_spec='{mode: VM, replicas: 1, etcd: {storageClassName: knest-shared}}' what='a control-plane VM' ;;
*) echo "e2e-host: E2E_HOST_CONTROL_PLANE is hosted or vm, not $mode" >&2; exit 2 ;;
esac
default_steps="drain drain lose"
[[ $mode == hosted ]] || default_steps=drain
read -r -a steps <<<"${E2E_HOST_STEPS:-$default_steps}"
TENANT_KUBECTL=$KNEST_CACHE/node-image/kube/$NODE_KUBE_VERSION/kubectl
hk() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { echo "e2e-host: $*" >&2; exit 1; }

(($(hk get nodes -o name | wc -l) >= 3)) || die "the kind host has fewer than 3 nodes: make kind-up KIND_WORKERS=2"
hk get storageclass knest-shared >/dev/null || die "the kind host has no StorageClass knest-shared (made before hack/kind/up.sh mounted $KIND_SHARED_DIR): make kind-down first"
if ! "$KNEST" --kubeconfig "$KIND_KUBECONFIG" get "$name" >/dev/null 2>&1; then
  log "creating tenant $name: $what, $workers workers"
  start=$SECONDS
  "$KNEST" --kubeconfig "$KIND_KUBECONFIG" create -f - --timeout 60m <<EOF
apiVersion: knest.dev/v1alpha1
kind: NestedCluster
metadata: {name: $name, namespace: default}
spec:
  apiServer: {serviceType: LoadBalancer}
  controlPlane: $control_plane_spec
  providers: {storage: {classes: [{name: knest, default: true, hostStorageClassName: knest-shared}]}}
  workers:
  - {name: workers, replicas: $workers, cpu: 1, memory: 2Gi}
EOF
  log "tenant Ready in $((SECONDS - start)) s"
fi
hk -n default get pods -l "cluster.x-k8s.io/cluster-name=$name" --no-headers -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName

# The apps, from flannel's image (busybox inside, preloaded in the node image).
kc=$(mktemp)
trap 'rm -f "$kc"' EXIT
tenant_kubeconfig "$name" "$kc"
tk() { "$TENANT_KUBECTL" --kubeconfig "$kc" "$@"; }
for c in StorageReady LoadBalancerReady; do
  hk -n default wait "nestedcluster/$name" --for=condition=$c --timeout 15m >/dev/null
done
image=$(tk -n kube-flannel get daemonset kube-flannel-ds -o jsonpath='{.spec.template.spec.containers[0].image}')
start=$SECONDS
tk apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  # Under emulation a new node's first pods can wait longer than the default 10 minutes.
  progressDeadlineSeconds: 3600
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: httpd
        image: $image
        imagePullPolicy: Never
        command: [/bin/busybox, sh, -c, 'mkdir -p /w && echo web >/w/index.html && exec /bin/busybox httpd -f -p 8080 -h /w']
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 2}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: data, namespace: default}
spec:
  replicas: 1
  progressDeadlineSeconds: 3600
  strategy: {type: Recreate}
  selector: {matchLabels: {app: data}}
  template:
    metadata: {labels: {app: data}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: $image
        imagePullPolicy: Never
        command: [/bin/busybox, sh, -c, 'test -f /data/index.html || echo "written \$(date -u +%FT%TZ)" >/data/index.html; exec /bin/busybox httpd -f -p 8080 -h /data']
        volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
for app in web data; do
  tk apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: $app, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: $app}
  ports: [{port: 80, targetPort: 8080}]
EOF
done
tk -n default rollout status deployment/web deployment/data --timeout 20m >/dev/null
apps=()
for app in web data; do
  address=
  until [[ -n $address ]] && curl -fsS --max-time 5 "http://$address/" >/dev/null 2>&1; do
    ((SECONDS - start < 1200)) || die "app $app does not answer from this machine after 20 minutes"
    sleep 2
    address=$(tk -n default get service "$app" -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
  done
  apps+=("$app=http://$address/")
done
log "apps answering $((SECONDS - start)) s after they were applied: ${apps[*]}"
tk -n default get pods -o wide

# vm_node EXCEPT [worker|cp]: a host node running a VM of the tenant, not EXCEPT (a
# second drain takes the node the VM moved to); with "worker", not the host's
# control-plane node, which holds the host's API; with "cp", a control-plane VM's.
control_plane=$(hk get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{.items[*].metadata.name}')
vm_node() {
  local n selector="cluster.x-k8s.io/cluster-name=$name"
  [[ ${2:-} != cp ]] || selector+=",cluster.x-k8s.io/role=control-plane"
  for n in $(hk -n default get vmi -l "$selector" -o jsonpath='{.items[*].status.nodeName}'); do
    [[ $n != "$1" ]] || continue
    [[ ${2:-} != worker || " $control_plane " != *" $n "* ]] || continue
    echo "$n"
    return
  done
}
last=
for step in "${steps[@]}"; do
  kind=
  [[ $step != lose ]] || kind=worker
  [[ $mode != vm || -n $last ]] || kind=cp
  node=$(vm_node "$last" "$kind")
  [[ -n $node ]] || die "no ${kind:-tenant} VM of $name runs on a node to $step"
  log "$step $node"
  APPS="${apps[*]}" KNEST=$KNEST hack/kind/disrupt.sh "$step" "$name" "$node"
  last=$node
done
log "passed: ${steps[*]}"
