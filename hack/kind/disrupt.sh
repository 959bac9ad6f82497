#!/usr/bin/env bash
# Takes a node of the kind host away from under a running tenant and measures what the
# tenant saw (docs/benchmark.md, "A host of several nodes"):
#
#   hack/kind/disrupt.sh drain TENANT NODE   # kubectl drain; uncordon once whole
#   hack/kind/disrupt.sh lose TENANT NODE    # the node's container stopped, no warning;
#                                            # its Node deleted, as an operator would
#
# TENANT is in namespace default; a lose waits first for a hosted etcd's members to be
# on distinct nodes. Throughout, every 2 s from this machine: a GET of the
# tenant's /readyz and a write of a ConfigMap through its API's LoadBalancer address,
# and a GET of each of APPS ("name=URL ..."). For lose, once the host has marked the
# node not ready and NOTICE more seconds have passed (default 300, what medik8s's
# NodeHealthCheck waits by default), it does what docs/design/host-maintenance.md tells
# an operator: deletes the host's Node object. Then it waits until the tenant is whole
# again: a hosted etcd's EtcdMembersHealthy True, as many tenant Nodes Ready and
# schedulable as before, every app answering. Then, for drain, it uncordons NODE; for
# lose, it waits until nothing of the tenant is left on NODE, starts it again and waits
# for it to be Ready and the tenant whole. It prints each step's time, the failed
# requests and the longest gap of each kind, and whether the ConfigMap written before
# is there and each app's page is the one it served before (a page kept on a volume
# shows the volume's data survived). A run that fails still uncordons the node it
# drained, or starts the node it stopped.
# Settings: hack/kind/env.sh, KNEST (the CLI, default bin/knest), APPS, NOTICE,
# WHOLE_TIMEOUT (seconds, default 2400).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

[[ $# == 3 && $1 =~ ^(drain|lose)$ ]] || { sed -n '2,25p' "$0"; exit 2; }
how=$1 name=$2 node=$3
KNEST=${KNEST:-bin/knest}
whole_timeout=${WHOLE_TIMEOUT:-2400}
notice=${NOTICE:-300}
read -r -a apps <<<"${APPS:-}"
TENANT_KUBECTL=$KNEST_CACHE/node-image/kube/$NODE_KUBE_VERSION/kubectl
hk() { "$KUBE_BIN_DIR/kubectl" --kubeconfig "$KIND_KUBECONFIG" "$@"; }
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
kind_engine

work=$(mktemp -d)
# On any exit, a node drained is uncordoned and a node stopped is started again, so
# that a failed run leaves the host whole for the next step.
disrupted=false
restore() {
  $disrupted || return 0
  case $how in
  drain) hk uncordon "$node" >/dev/null || true ;;
  lose) "$KIND_ENGINE" start "$node" >/dev/null 2>&1 || true ;;
  esac
}
trap 'kill $(jobs -p) 2>/dev/null || true; restore; rm -rf "$work"' EXIT
# A node is lost only once a hosted tenant's etcd members are on distinct host nodes
# again: after a drain knest moves a member off a node holding two (at most one move
# in 30 minutes, docs/design/host-maintenance.md), and until then that node's loss
# takes the quorum, as designed.
if [[ $how == lose ]]; then
  etcd_nodes() { hk -n default get pods -l "cluster.x-k8s.io/cluster-name=$name,controlplane.knest.dev/component=etcd" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}'; }
  waited=$SECONDS
  until members=$(etcd_nodes) && [[ $(wc -l <<<"$members") == $(sort -u <<<"$members" | wc -l) ]]; do
    ((SECONDS - waited < whole_timeout)) || { echo "etcd members of $name not on distinct nodes after $whole_timeout s:" $members >&2; exit 1; }
    sleep 10
  done
  log "etcd members of $name on distinct host nodes ($((SECONDS - waited)) s waited)"
fi
kc=$work/tenant.kubeconfig
tenant_kubeconfig "$name" "$kc"
tk() { "$TENANT_KUBECTL" --kubeconfig "$kc" --request-timeout=5s "$@"; }
marker="$how-$(date +%s)"
tk create configmap "$marker" --from-literal=written="$(date -u +%FT%TZ)" >/dev/null
page() { curl -fsS --max-time 5 "$1"; }
for app in "${apps[@]}"; do
  # Three tries: one slow answer of a guest under emulation is no reason to stop.
  for try in 1 2 3; do
    page "${app#*=}" >"$work/before-${app%%=*}" && break
    ((try < 3)) || { echo "app ${app%%=*} does not answer at ${app#*=}" >&2; exit 1; }
    sleep 5
  done
done
# Tenant nodes Ready and schedulable, the count the tenant must be back to.
ready_nodes() {
  tk get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^ True$'
}
nodes_before=$(ready_nodes)

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
for app in "${apps[@]}"; do poll "$work/app-${app%%=*}" page "${app#*=}" & done

start=$(date +%s)
case $how in
drain)
  log "draining $node"
  disrupted=true
  hk drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=30m >"$work/drain.log" 2>&1 || {
    cat "$work/drain.log" >&2
    exit 1
  }
  log "drained in $(($(date +%s) - start)) s; waiting for the tenant to be whole"
  ;;
lose)
  log "stopping $node's container ($KIND_ENGINE stop)"
  disrupted=true
  "$KIND_ENGINE" stop --time 0 "$node" >/dev/null
  ;;
esac
taken=$(($(date +%s) - start))

# Failed tries, and the longest run of time from a failed try to the next answer.
summary() {
  awk '{ n++; last = $1; if ($2) { f++; if (!s) s = $1 } else if (s) { if ($1 - s > g) g = $1 - s; s = 0 } }
    END { note = ""; if (s) { if (last - s > g) g = last - s; note = " (failing at the end)" }
      printf "%d of %d failed, longest gap %d s%s\n", f, n, g, note }' "$1"
}
requests() {
  echo "  tenant /readyz: $(summary "$work/readyz")"
  echo "  tenant writes: $(summary "$work/writes")"
}

hosted=$(hk -n default get hostedcontrolplane -l "cluster.x-k8s.io/cluster-name=$name" -o name 2>/dev/null | head -1)
whole() {
  if [[ -n $hosted ]]; then
    [[ $(hk -n default get "$hosted" -o jsonpath='{.status.conditions[?(@.type=="EtcdMembersHealthy")].status}') == True ]] || return 1
  fi
  (($(ready_nodes) >= nodes_before)) || return 1
  for app in "${apps[@]}"; do page "${app#*=}" >/dev/null || return 1; done
}
# wait_until WHAT CMD...: CMD true within the time left, or the run fails.
wait_until() {
  local what=$1
  shift
  until "$@"; do
    if (($(date +%s) - start > whole_timeout)); then
      log "not $what after $whole_timeout s"
      hk -n default get "$hosted" -o jsonpath='{.status.conditions}' 2>/dev/null || true
      tk get nodes || true
      echo "requests until now:"
      requests
      for app in "${apps[@]}"; do echo "  app ${app%%=*}: $(summary "$work/app-${app%%=*}")"; done
      exit 1
    fi
    sleep 5
  done
}
if [[ $how == lose ]]; then
  # The host marks the node not ready after its node-monitor grace period (40 s).
  not_ready() { [[ $(hk get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') != True ]]; }
  wait_until "marked not ready" not_ready
  noticed=$(($(date +%s) - start))
  log "$node not ready $noticed s after it stopped; deleting its Node object in $notice s (NOTICE)"
  sleep "$notice"
  hk delete node "$node" --wait=false >/dev/null
  deleted=$(($(date +%s) - start))
else
  # What the drain set going (a member Pending, a VM leaving) shows in status only
  # after a while; do not take the state before it for whole.
  sleep 60
fi
wait_until whole whole
back=$(($(date +%s) - start))
log "whole again $back s after the start"
kill $(jobs -p) 2>/dev/null || true

case $how in
drain)
  hk uncordon "$node" >/dev/null
  disrupted=false
  ;;
lose)
  # With its Node deleted the node's pods are gone; KubeVirt fails and cleans up the
  # VMIs that ran there, and Cluster API finishes deleting their Machines.
  left() {
    local ready
    ready=$(ready_nodes) && ((ready >= nodes_before)) &&
      [[ -z $(hk -n default get vmi -l "cluster.x-k8s.io/cluster-name=$name" -o jsonpath="{.items[?(@.status.nodeName==\"$node\")].metadata.name}") ]] &&
      [[ $(tk get nodes --no-headers | wc -l) == "$ready" ]]
  }
  wait_until "cleaned up" left
  cleaned=$(($(date +%s) - start))
  log "nothing of $name left on $node $cleaned s after the start; starting it again"
  "$KIND_ENGINE" start "$node" >/dev/null
  disrupted=false
  wait_until "back" hk wait --for=condition=Ready "node/$node" --timeout=10s
  # Its Node object is new, and so is its pod range; a real host's CNI follows that.
  use_pod_range "$node"
  # kube-router keeps the node's old range in its set of pod ranges until it
  # restarts, and masquerades traffic to the new one: pods of other nodes then
  # reach the node's pods from their node's address, which NetworkPolicies refuse
  # (CAPK's SSH check of a VM there never passed, 2026-12-01).
  hk -n kube-system rollout restart ds/kube-router >/dev/null
  hk -n kube-system rollout status ds/kube-router --timeout=5m >/dev/null
  returned=$(($(date +%s) - start))
  wait_until "whole with $node back" whole
  ;;
esac

kept=$(tk get configmap "$marker" -o jsonpath='{.data.written}' 2>/dev/null || echo "")
ok=true
[[ -n $kept ]] || ok=false
{
  echo "tenant $name, host node $node: $how"
  case $how in
  drain) echo "  drain: $taken s" ;;
  lose) echo "  node marked not ready: $noticed s; its Node object deleted: $deleted s; nothing of the tenant left there: $cleaned s; started again, Ready: $returned s" ;;
  esac
  echo "  whole again (etcd members ready, $nodes_before tenant nodes Ready and schedulable, apps answering): $back s"
  requests
  for app in "${apps[@]}"; do
    a=${app%%=*}
    if [[ "$(page "${app#*=}" 2>/dev/null)" == "$(cat "$work/before-$a")" ]]; then same=same; else same=CHANGED; ok=false; fi
    echo "  app $a: $(summary "$work/app-$a"); its page after: $same"
  done
  echo "  ConfigMap written before: $([[ -n $kept ]] && echo "there ($kept)" || echo MISSING)"
}
tk delete configmap "$marker" >/dev/null 2>&1 || true
$ok
