#!/usr/bin/env bash
# Drains a node of the kind host under a running tenant and measures what the tenant
# saw (docs/benchmark.md, "A host of several nodes"):
#
#   hack/kind/drain.sh TENANT NODE     # a tenant in namespace default, a host node
#
# Throughout, every 2 s from this machine through the API's LoadBalancer address: a
# GET of /readyz and a write of a ConfigMap. It drains NODE (kubectl drain
# --ignore-daemonsets --delete-emptydir-data), waits until the tenant is whole again
# (a hosted etcd's EtcdMembersHealthy True, every tenant Node Ready and schedulable),
# uncordons NODE, and prints: the drain's time, the time until whole, failed requests
# and the longest gap of each kind, and whether the ConfigMap written before is there.
# Settings: hack/kind/env.sh, KNEST (the CLI, default bin/knest), WHOLE_TIMEOUT
# (seconds, default 2400).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

[[ $# == 2 ]] || { sed -n '2,14p' "$0"; exit 2; }
name=$1 node=$2
KNEST=${KNEST:-bin/knest}
whole_timeout=${WHOLE_TIMEOUT:-2400}
TENANT_KUBECTL=$KNEST_CACHE/node-image/kube/$NODE_KUBE_VERSION/kubectl
hk() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
kc=$work/tenant.kubeconfig
tenant_kubeconfig "$name" "$kc"
tk() { "$TENANT_KUBECTL" --kubeconfig "$kc" --request-timeout=5s "$@"; }
marker="drain-$(date +%s)"
tk create configmap "$marker" --from-literal=written="$(date -u +%FT%TZ)" >/dev/null

# One line per try: seconds since the epoch and 0 (answered) or 1 (failed).
poll() {
  local out=$1
  shift
  while :; do
    if "$@" >/dev/null 2>&1; then echo "$(date +%s) 0"; else echo "$(date +%s) 1"; fi >>"$out"
    sleep 2
  done
}
poll "$work/readyz" tk get --raw /readyz &
i=0
write() { i=$((i + 1)); tk patch configmap "$marker" --type merge -p "{\"data\":{\"n\":\"$i\"}}"; }
poll "$work/writes" write &

log "draining $node"
start=$(date +%s)
hk drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=30m >"$work/drain.log" 2>&1 || {
  cat "$work/drain.log" >&2
  exit 1
}
drained=$(($(date +%s) - start))
log "drained in $drained s; waiting for the tenant to be whole"

hosted=$(hk -n default get hostedcontrolplane -l "cluster.x-k8s.io/cluster-name=$name" -o name 2>/dev/null | head -1)
whole() {
  if [[ -n $hosted ]]; then
    [[ $(hk -n default get "$hosted" -o jsonpath='{.status.conditions[?(@.type=="EtcdMembersHealthy")].status}') == True ]] || return 1
  fi
  local nodes
  nodes=$(tk get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}') || return 1
  [[ -z $nodes ]] || ! grep -qv '^ True$' <<<"$nodes"
}
# What the drain set going (a member Pending, a VM leaving) shows in status within
# seconds; do not take the state before it for whole.
sleep 20
until whole; do
  if (($(date +%s) - start > whole_timeout)); then
    log "not whole after $whole_timeout s"
    hk -n default get "$hosted" -o jsonpath='{.status.conditions}' 2>/dev/null || true
    tk get nodes || true
    exit 1
  fi
  sleep 5
done
back=$(($(date +%s) - start))
hk uncordon "$node" >/dev/null
kill $(jobs -p) 2>/dev/null || true

# Failed tries, and the longest run of time from a failed try to the next answer.
summary() {
  awk '{ n++; last = $1; if ($2) { f++; if (!s) s = $1 } else if (s) { if ($1 - s > g) g = $1 - s; s = 0 } }
    END { note = ""; if (s) { if (last - s > g) g = last - s; note = " (failing at the end)" }
      printf "%d of %d failed, longest gap %d s%s\n", f, n, g, note }' "$1"
}
kept=$(tk get configmap "$marker" -o jsonpath='{.data.written}' 2>/dev/null || echo "")
cat <<EOF
tenant $name, host node $node drained
  drain: $drained s
  whole again (etcd members ready, tenant nodes Ready and schedulable): $back s after the drain began
  tenant /readyz: $(summary "$work/readyz")
  tenant writes: $(summary "$work/writes")
  ConfigMap written before: $([[ -n $kept ]] && echo "there ($kept)" || echo MISSING)
EOF
tk delete configmap "$marker" >/dev/null 2>&1 || true
[[ -n $kept ]]
