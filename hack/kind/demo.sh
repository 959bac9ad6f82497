#!/usr/bin/env bash
# `make demo` after hack/kind/up.sh: creates NestedCluster demo (1 control plane + 1
# worker) on the kind host with the knest CLI, exposes its API as a LoadBalancer
# Service so that it is reachable from this machine, writes a kubeconfig that works from
# here, waits for its storage and load-balancer providers, prints the tenant's nodes
# and StorageClasses, and deploys a sample app with a volume behind a LoadBalancer
# Service, which it asks from here. Running it again on an existing demo writes the
# kubeconfig and asks the app again (its page kept on the volume).
# Settings: hack/kind/env.sh; DEMO_DIR, KNEST (the CLI), DEMO_CONTROL_PLANE (vm or
# hosted; by default hosted where the kind host emulates its VMs, vm under KVM).
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
  mode=${DEMO_CONTROL_PLANE:-}
  if [[ -z $mode ]]; then
    # Under emulation one guest instead of two: on the slower 2-core machine a VM
    # control plane's API server missed kubeadm's 10-minute check (docs/e2e.md).
    mode=vm
    # shellcheck disable=SC1090
    if [[ -f ${KIND_ENV_FILE:-} ]] && (source "$KIND_ENV_FILE" && [[ ${KNEST_E2E_ACCEL:-} != kvm ]]); then mode=hosted; fi
  fi
  echo "control plane: $mode (DEMO_CONTROL_PLANE=vm or hosted chooses)"
  # Sized for a 2-core host: a VM control plane needs 2 vCPUs (kubeadm's preflight).
  sizes=(--worker-cpu 1 --worker-memory 2Gi)
  if [[ $mode == vm ]]; then sizes+=(--control-plane-memory 3Gi); fi
  knest create demo --control-plane-mode "$mode" "${sizes[@]}" --service-type LoadBalancer --timeout 60m
fi

# The API's Service: CAPK's for a VM control plane, knest's for a hosted one. Its
# LoadBalancer address (MetalLB's, on the kind network) reaches it from this machine
# and, unlike a node's address, stays the same when a kind node restarts.
api_service=demo-lb
if kubectl -n default get service demo-apiserver >/dev/null 2>&1; then api_service=demo-apiserver; fi
address=$(kubectl -n default get service "$api_service" -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
[[ -n $address ]] || { echo "Service $api_service has no LoadBalancer address" >&2; exit 1; }
kc=$DEMO_DIR/demo.kubeconfig
knest kubeconfig demo --server "https://$address:$(kubectl -n default get service "$api_service" -o jsonpath='{.spec.ports[0].port}')" --output-file "$kc"
# The providers every tenant has by default: volumes and load balancers.
for c in StorageReady LoadBalancerReady; do
  kubectl -n default wait nestedcluster/demo --for=condition=$c --timeout 10m >/dev/null
done
tk() { "$TENANT_KUBECTL" --kubeconfig "$kc" "$@"; }
tk get nodes -o wide
tk get storageclass

# A sample app that uses both: a page written once to a claim of the default class,
# served behind a LoadBalancer Service and asked from this machine. Its image is
# flannel's (busybox inside), preloaded in the node image: tenants pull nothing.
image=$(tk -n kube-flannel get daemonset kube-flannel-ds -o jsonpath='{.spec.template.spec.containers[0].image}')
start=$SECONDS
tk apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: hello, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: default}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: $image
        imagePullPolicy: Never
        command: [/bin/busybox, sh, -c, 'test -f /data/index.html || echo "hello from a knest volume, written \$(date -u)" >/data/index.html; exec /bin/busybox httpd -f -p 8080 -h /data']
        ports: [{containerPort: 8080}]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: hello}}]
---
apiVersion: v1
kind: Service
metadata: {name: hello, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: hello}
  ports: [{port: 80, targetPort: 8080}]
EOF
tk -n default rollout status deployment/hello --timeout 15m >/dev/null
echo "sample app hello: pod Running with its volume mounted $((SECONDS - start)) s after it was applied"
address=
until [ -n "$address" ]; do
  [ $((SECONDS - start)) -lt 900 ] || { echo "Service hello got no address in 15 minutes" >&2; exit 1; }
  address=$(tk -n default get service hello -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
  [ -n "$address" ] || sleep 1
done
until page=$(curl -fsS --max-time 5 "http://$address/" 2>/dev/null); do
  [ $((SECONDS - start)) -lt 900 ] || { echo "http://$address/ did not answer in 15 minutes" >&2; exit 1; }
  sleep 1
done
echo "sample app hello: http://$address/ answered $((SECONDS - start)) s after it was applied: $page"
cat <<EOF

Tenant:  $TENANT_KUBECTL --kubeconfig $kc get pods -A
         curl http://$address/   (the sample app: its page on a volume of the default
         class knest, its address from the host's MetalLB)
Host:    $KNEST --kubeconfig $KIND_KUBECONFIG get demo
         $KUBE_BIN_DIR/kubectl --kubeconfig $KIND_KUBECONFIG get vmi -A
Stop everything: make demo-down
EOF
