#!/usr/bin/env bash
# Deletes what up.sh made: the kind cluster, its kubeconfig and env file. The node
# image stays in the container engine (up.sh imports it again only when it changed).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
kind_engine

# thaw_nodes thaws every frozen cgroup of the cluster's node containers. runc freezes
# a container's cgroup while it sets it up (cgroup v1 device rules); killed in between,
# as a node stops, it leaves the cgroup frozen, and its processes wait in the kernel's
# refrigerator where SIGKILL cannot reach them: the engine then fails to remove the
# node ("given PIDs did not die within timeout"), seen at the end of a CI run.
thaw_nodes() {
  local node id state
  for node in $("$KIND" get nodes --name "$KIND_CLUSTER" 2>/dev/null); do
    id=$("$KIND_ENGINE" inspect --format '{{.Id}}' "$node" 2>/dev/null) || continue
    while read -r state; do
      case $state in
      */freezer.state) [[ $(cat "$state" 2>/dev/null) != FROZEN ]] || echo THAWED >"$state" ;;
      */cgroup.freeze) [[ $(cat "$state" 2>/dev/null) != 1 ]] || echo 0 >"$state" ;;
      esac
    done < <(find /sys/fs/cgroup -path "*$id*" \( -name freezer.state -o -name cgroup.freeze \) 2>/dev/null)
  done
}

if ! "$KIND" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"; then
  echo "thawing frozen cgroups of the $KIND_CLUSTER nodes, then deleting again" >&2
  thaw_nodes
  "$KIND" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"
fi
rm -f "$KIND_KUBECONFIG" "$KIND_ENV_FILE"
rm -rf "$KIND_SHARED_DIR"
