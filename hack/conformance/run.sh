#!/usr/bin/env bash
# `make conformance` after hack/kind/up.sh and hack/conformance/build.sh: runs (a part
# of) the Kubernetes conformance suite with hydrophone on a knest tenant of the kind
# host and keeps the suite's own results.
#
# The tenant (CONFORMANCE_CLUSTER, made unless it exists, and then it must be of this
# version and mode): NODE_KUBE_VERSION, control plane CONFORMANCE_CONTROL_PLANE (hosted
# or vm), two workers booting the node image with the suite's images baked in, its API
# behind a LoadBalancer address of the host.
# Results: $KNEST_CACHE/conformance/results/<version>-<mode>/<UTC time>/ with e2e.log,
# junit_01.xml, hydrophone.log and summary.txt (the knest commit, the machine, the
# focus, passed/failed/skipped and the duration).
#
# Settings: hack/kind/env.sh; FOCUS and SKIP (ginkgo regular expressions; FOCUS
# defaults to every conformance test), PARALLEL (ginkgo processes), RUNNER (hydrophone,
# the suite in a pod of the tenant, or ginkgo, the suite on this machine), HYDROPHONE
# (its binary), KNEST (the CLI).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/../kind/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
die() { echo "conformance: $*" >&2; exit 1; }
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

kind_engine
version=$NODE_KUBE_VERSION
name=${CONFORMANCE_CLUSTER:-conformance}
mode=${CONFORMANCE_CONTROL_PLANE:-hosted}
focus=${FOCUS:-'\[Conformance\]'}
skip=${SKIP:-}
parallel=${PARALLEL:-1}
runner=${RUNNER:-hydrophone}
[[ $mode == hosted || $mode == vm ]] || die "CONFORMANCE_CONTROL_PLANE is hosted or vm, not $mode"
[[ $runner == hydrophone || $runner == ginkgo ]] || die "RUNNER is hydrophone or ginkgo, not $runner"
KNEST=${KNEST:-bin/knest}
HYDROPHONE=${HYDROPHONE:?HYDROPHONE must name the hydrophone binary}
built=$KNEST_CACHE/conformance/$version
TENANT_KUBECTL=$KNEST_CACHE/node-image/kube/$version/kubectl
# shellcheck disable=SC1090 # the guests' accelerator, for the summary
[[ -f $KIND_ENV_FILE ]] && source "$KIND_ENV_FILE"
knest() { "$KNEST" --kubeconfig "$KIND_KUBECONFIG" "$@"; }

images=$(ls -td "$built"/images/*/ 2>/dev/null | head -1)
[[ -f $built/node/node-containerdisk.tar && -n $images ]] || die "$built has no conformance build: make conformance-images"
busybox=$(grep '/busybox:' "$images/refs.txt" | head -1)
[[ -n $busybox ]] || die "no busybox image in $images/refs.txt"
node_image=docker.io/knest/node-conformance:$version

# A kept tenant is reused, and its results are filed under the asked version and mode:
# a tenant of another one would file them under the wrong heading.
hk() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" -n default "$@"; }
want="$version $( [[ $mode == vm ]] && echo VM || echo Hosted)"
have=$(hk get nestedcluster "$name" -o jsonpath='{.spec.version} {.spec.controlPlane.mode}' 2>/dev/null) || have=
[[ -z $have || $have == "$want" ]] || die "tenant $name is $have, not $want: delete it ($KNEST --kubeconfig $KIND_KUBECONFIG delete $name) or name another (CONFORMANCE_CLUSTER=)"
# A host brought up for another version lacks this one's hosted control-plane images,
# and the tenant's control plane would wait in ImagePullBackOff: make conformance loads
# them (hack/kind/up.sh) before it calls this script.
if [[ $mode == hosted ]]; then
  for node in $("$KIND" get nodes --name "$KIND_CLUSTER"); do
    "$KIND_ENGINE" exec "$node" ctr -n k8s.io images ls -q 2>/dev/null | grep -x "knest.local/kubeadm:$version" >/dev/null ||
      die "kind node $node has no hosted control-plane images of $version: make conformance NODE_KUBE_VERSION=$version loads them"
  done
fi
hack/conformance/load.sh

if [[ -z $have ]]; then
  log "creating tenant $name ($version, control plane $mode, two workers of $node_image)"
  # The default node image boots its kernel from the kernel-boot image; a pool with its
  # own image is booted the same way here, the kernel being the same.
  cp="{mode: Hosted}"
  [[ $mode == vm ]] && cp="{mode: VM, image: $node_image, kernelBoot: {image: docker.io/knest/node-kernel:$version}}"
  knest create -f - --timeout 120m <<EOF
apiVersion: knest.dev/v1alpha1
kind: NestedCluster
metadata: {name: $name, namespace: default}
spec:
  version: $version
  apiServer: {serviceType: LoadBalancer}
  controlPlane: $cp
  workers:
  - {name: workers, replicas: 2, image: $node_image, kernelBoot: {image: docker.io/knest/node-kernel:$version}}
EOF
fi
results=$KNEST_CACHE/conformance/results/$version-$mode/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$results"
kc=$results/tenant.kubeconfig
tenant_kubeconfig "$name" "$kc" || die "no kubeconfig for tenant $name"
tk() { "$TENANT_KUBECTL" --kubeconfig "$kc" "$@"; }
tk wait --for=condition=Ready nodes --all --timeout=30m >/dev/null
tk get nodes -o wide
dns_domain=$(hk get nestedcluster "$name" -o jsonpath='{.spec.network.dnsDomain}')

# hydrophone's progress report (--disable-progress-status) reads e2e.log in the pod
# and ends the whole run when that file does not yet name the spec count, which a
# slow guest makes likely ("could not find test spec count"). A run left by an
# interrupted one would make hydrophone refuse to start.
"$HYDROPHONE" --kubeconfig "$kc" --cleanup >/dev/null 2>&1 || true
# The suite's BeforeSuite waits for every kube-system pod to be ready at once, for
# 10 minutes at hardware speed; on emulated workers CoreDNS's 1-second readiness probe
# kept failing past that (the timeout is named in docs/conformance.md). It follows the
# host's slowdown, as knest's own waits do.
slowdown=${KNEST_HOST_SLOWDOWN:-1}
[[ -z ${KNEST_HOST_SLOWDOWN:-} && ${KNEST_E2E_ACCEL:-} == tcg ]] && slowdown=3 # up.sh's default
system_pods_timeout=$((10 * slowdown))m

# A part starts on a quiet tenant. The suite deletes its namespaces without waiting,
# and an emulated worker tore down the garbage collector specs' hundred pods at two or
# three a minute, 15 minutes into the next part, whose pods then missed their
# timeouts. Namespaces an interrupted run left (label e2e-run) are deleted here too.
# Quiet: no namespace terminating, and no kubelet running more pods than the API
# binds to its node (kubelet_running_pods counts pods with a sandbox).
extra_pods() {
  local node running bound
  for node in $(tk get nodes -o jsonpath='{.items[*].metadata.name}'); do
    running=$(tk get --raw "/api/v1/nodes/$node/proxy/metrics" | awk '$1 == "kubelet_running_pods" {print $2}')
    bound=$(tk get pods -A --field-selector "spec.nodeName=$node" --no-headers | wc -l)
    ((${running:-0} <= bound)) || echo "$node: $running pods running, $bound bound"
  done
}
tk delete namespaces -l e2e-run --wait=false
quiet_start=$SECONDS quiet_timeout=$((20 * 60 * slowdown))
until busy=$(tk get namespaces --no-headers | awk '$2 == "Terminating" {print "namespace " $1 " terminating"}'; extra_pods) && [[ -z $busy ]]; do
  if ((SECONDS - quiet_start > quiet_timeout)); then
    log "the tenant is still busy after $quiet_timeout s; starting anyway:"$'\n'"$busy"
    break
  fi
  sleep 20
done
log "tenant quiet after $((SECONDS - quiet_start)) s"
start=$SECONDS
rc=0
if [[ $runner == ginkgo ]]; then
  # The same suite run from this machine against the tenant's API, as make e2e's smoke
  # part does: no suite pod to start on an emulated worker.
  log "ginkgo: focus '$focus' skip '$skip' parallel $parallel; results in $results"
  KUBE_TEST_REPO_LIST=$images/repo-list.yaml "$built/bin/ginkgo" --procs "$parallel" --focus "$focus" --skip "$skip" \
    --timeout 24h --no-color --silence-skips "$built/bin/e2e.test" -- \
    --kubeconfig "$kc" --provider local --kubectl-path "$built/bin/kubectl" --report-dir "$results" \
    --dns-domain "$dns_domain" --system-pods-startup-timeout "$system_pods_timeout" >"$results/e2e.log" 2>&1 || rc=$?
  tail -20 "$results/e2e.log"
else
  log "hydrophone: focus '$focus' skip '$skip' parallel $parallel; results in $results"
  "$HYDROPHONE" --kubeconfig "$kc" --output-dir "$results" \
    --conformance-image "knest.local/conformance:$version" --busybox-image "$busybox" \
    --test-repo-list "$images/repo-list.yaml" --startup-timeout 15m \
    --focus "$focus" --skip "$skip" --parallel "$parallel" --disable-progress-status \
    --extra-args "--dns-domain=$dns_domain" --extra-args "--system-pods-startup-timeout=$system_pods_timeout" \
    2>&1 | tee "$results/hydrophone.log" || rc=$?
  # hydrophone ends when it loses the tenant API for a while (its LoadBalancer address
  # withdrawn, say), while the suite goes on in its pod: wait for the suite there, as
  # long as the API answers within the day, and copy its files.
  if [[ ! -f $results/junit_01.xml ]]; then
    log "hydrophone ended without the suite's results (exit $rc); waiting for the suite in its pod"
    pod=(-n conformance exec e2e-conformance-test -c output-container --)
    until tk "${pod[@]}" test -f /tmp/results/done 2>/dev/null || ((SECONDS - start > 86400)); do sleep 60; done
    for f in e2e.log junit_01.xml; do
      tk "${pod[@]}" cat "/tmp/results/$f" >"$results/$f.tmp" 2>/dev/null && mv "$results/$f.tmp" "$results/$f" || rm -f "$results/$f.tmp"
    done
  fi
  "$HYDROPHONE" --kubeconfig "$kc" --cleanup >/dev/null 2>&1 || true
fi
took=$((SECONDS - start))

junit=$results/junit_01.xml
[[ -f $junit ]] || die "no junit_01.xml from the suite (exit $rc): see $results"
# The specs' states, from the suite's JUnit report (its totals count the suite's
# setup nodes too, once per process).
cases=$(grep -o '<testcase name="\[It\] [^"]*" classname="[^"]*" status="[a-z]*"' "$junit" || true)
states=$(sed 's/.* status="//; s/"$//' <<<"$cases")
count() { grep -cx "$1" <<<"$states" || true; }
tests=$(grep -c . <<<"$states" || true) passed=$(count passed) skipped=$(count skipped)
failed=$((tests - passed - skipped))
tee "$results/summary.txt" <<EOF
knest commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with local changes)')
machine: $(nproc) cores $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), guests under ${KNEST_E2E_ACCEL:-?}
tenant: $version, control plane $mode, 2 workers; runner $runner, $parallel at once
focus: $focus
skip: $skip
passed $passed, failed $failed, skipped $skipped (of $tests specs), $took s
failed specs:
$(grep -v 'status="\(passed\|skipped\)"' <<<"$cases" | sed 's/<testcase name="\[It\] \([^"]*\)".*/  \1/; s/&#39;/'\''/g; s/&#34;/"/g; s/&amp;/\&/g' || true)
EOF
exit "$rc"
