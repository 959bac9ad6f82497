#!/usr/bin/env bash
# What a set of pods on a kind host costs: CPU in cores (the cgroup's usage over a
# window) and memory in MiB (the working set: usage less inactive file cache, as the
# kubelet counts it), summed over the pods a label selector picks, read from the
# pods' cgroups (v1) in the kind node. Several windows; prints each and the median.
#
#   hack/bench/podcost.sh NAMESPACE SELECTOR [WINDOW_SECONDS] [RUNS]
#
# e.g. a hosted control plane (its API server, controller manager, scheduler,
# konnectivity server and etcd):
#   hack/bench/podcost.sh team-a 'cluster.x-k8s.io/cluster-name=demo,controlplane.knest.dev/component'
# and a control-plane VM's virt-launcher pod:
#   hack/bench/podcost.sh team-a 'cluster.x-k8s.io/cluster-name=demo,cluster.x-k8s.io/role=control-plane,kubevirt.io=virt-launcher'
# KUBECONFIG names the kind host; KIND_ENGINE (podman or docker) defaults to podman.
set -euo pipefail
ns=${1:?namespace} selector=${2:?label selector} window=${3:-60} runs=${4:-5}
engine=${KIND_ENGINE:-podman}
kubectl=${KUBECTL:-kubectl}

mapfile -t pods < <("$kubectl" -n "$ns" get pods -l "$selector" --field-selector=status.phase=Running \
  -o jsonpath='{range .items[*]}{.metadata.uid} {.spec.nodeName}{"\n"}{end}')
[ ${#pods[@]} -gt 0 ] || { echo "no running pods match $selector in $ns" >&2; exit 1; }

# sample prints "cpu_ns mem_bytes" summed over the pods.
sample() {
  local cpu=0 mem=0 uid node dir
  for p in "${pods[@]}"; do
    read -r uid node <<<"$p"
    dir=$("$engine" exec "$node" sh -c "find /sys/fs/cgroup/cpuacct -maxdepth 5 -type d \\( -name '*pod${uid//-/_}.slice' -o -name 'pod${uid}' \\) | head -1")
    [ -n "$dir" ] || { echo "no cgroup for pod $uid on $node" >&2; exit 1; }
    local rel=${dir#/sys/fs/cgroup/cpuacct/}
    read -r c u i < <("$engine" exec "$node" sh -c "cat /sys/fs/cgroup/cpuacct/$rel/cpuacct.usage \
      /sys/fs/cgroup/memory/$rel/memory.usage_in_bytes; grep '^total_inactive_file ' /sys/fs/cgroup/memory/$rel/memory.stat | cut -d' ' -f2" | tr '\n' ' '; echo)
    cpu=$((cpu + c)) mem=$((mem + u - i))
  done
  echo "$cpu $mem"
}

cores=() mibs=()
for ((r = 1; r <= runs; r++)); do
  read -r c0 _ < <(sample)
  sleep "$window"
  read -r c1 m1 < <(sample)
  cores+=("$(awk -v d=$((c1 - c0)) -v w="$window" 'BEGIN { printf "%.3f", d / (w * 1e9) }')")
  mibs+=("$((m1 / 1048576))")
  echo "run $r: ${cores[-1]} cores, ${mibs[-1]} MiB (${#pods[@]} pods, ${window}s)"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "median of $runs: $(median "${cores[@]}") cores, $(median "${mibs[@]}") MiB"
