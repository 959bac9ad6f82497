#!/bin/sh
# knest-resume-bootstrap init|join: runs after CABPK's one `kubeadm init` or `kubeadm
# join` (as a postKubeadmCommand) and finishes a bootstrap that failed on timing, so a
# slow control plane does not cost a new VM, or a stuck cluster.
#
#   init  `kubeadm init` can fail after the control plane is up: its last phases make
#         API requests with fixed 10-second timeouts, and KCP never replaces a
#         control plane it counts as initialized. If the control plane's manifests
#         and admin.conf were written, the phases after the control plane's start
#         (each idempotent) are run again until they pass.
#   join  A join that timed out (discovery, TLS bootstrap, the control plane's etcd
#         check) is reset and run again. KCP's machines all run `init` (one
#         kubeadmConfigSpec), so a control-plane join is told by its join config. The
#         certificates CABPK wrote for a control-plane join are kept across the reset,
#         which deletes them. A control-plane join that got as far as adding its etcd
#         member is never reset (`kubeadm reset` could leave the member behind and cost
#         the cluster its quorum): if the member became a voter, the phases after
#         etcd-join are run: kubeadm (v1.34.4, v1.35.4) retries a promotion that succeeded
#         but timed out until it fails with "can only promote a learner member"
#         (kubernetes/kubeadm#3317). Otherwise it is left to KCP's remediation, which
#         removes the member.
#
# Writes CABPK's sentinel on success, which is what CAPK's bootstrap check reads.
set -u

mode=${1:?usage: knest-resume-bootstrap init|join}
sentinel=${KNEST_SENTINEL:-/run/cluster-api/bootstrap-success.complete}
kubeadm_dir=${KNEST_KUBEADM_DIR:-/run/kubeadm}
kubernetes_dir=${KNEST_KUBERNETES_DIR:-/etc/kubernetes}
# kubeadm's etcd serves /readyz without TLS on its metrics address.
etcd_readyz=${KNEST_ETCD_READYZ:-http://127.0.0.1:2381/readyz?verbose}
attempts=${KNEST_RESUME_ATTEMPTS:-5}
delay=${KNEST_RESUME_DELAY:-30}

log() { echo "knest-resume-bootstrap: $*" >&2; }

# etcd_voter: the local etcd member answers and is not a learner (the readyz check
# non_learner of etcd 3.6, which kubeadm runs from v1.34; an etcd without it answers
# "not a voter", and the join stays KCP's to remediate). The node image has python3,
# not curl.
etcd_voter() {
	python3 - "$etcd_readyz" <<'EOF'
import sys, urllib.error, urllib.request
try:
    body = urllib.request.urlopen(sys.argv[1], timeout=30).read()
except urllib.error.HTTPError as e:  # 503 when any check fails, e.g. a slow linearizable read
    body = e.read()
except Exception:
    sys.exit(1)
sys.exit(0 if b"[+]non_learner ok" in body else 1)
EOF
}

# run_resume calls resume until it succeeds or the attempts run out, and exits.
run_resume() {
	attempt=1
	while [ "$attempt" -le "$attempts" ]; do
		log "kubeadm $mode did not complete; attempt $attempt of $attempts in ${delay}s"
		sleep "$delay"
		if resume; then
			echo success >"$sentinel"
			log "kubeadm $mode completed"
			exit 0
		fi
		attempt=$((attempt + 1))
	done
	log "kubeadm $mode still failing after $attempts attempts; leaving the machine to its health check"
	exit 1
}

[ -f "$sentinel" ] && exit 0

if [ "$mode" = init ] && [ ! -f "$kubeadm_dir/kubeadm.yaml" ]; then
	mode=join # a control-plane join
fi

case $mode in
init)
	config=$kubeadm_dir/kubeadm.yaml
	if [ ! -f "$kubernetes_dir/admin.conf" ] || [ ! -f "$kubernetes_dir/manifests/kube-apiserver.yaml" ]; then
		log "kubeadm init failed before the control plane was written; nothing to resume"
		exit 1
	fi
	resume() {
		for phase in "upload-config all" mark-control-plane bootstrap-token "kubelet-finalize all" "addon all"; do
			# shellcheck disable=SC2086 # a phase and its sub-phase are two words
			kubeadm init phase $phase --config "$config" || return 1
		done
	}
	;;
join)
	config=$kubeadm_dir/kubeadm-join-config.yaml
	[ -f "$config" ] || exit 1
	if [ -f "$kubernetes_dir/manifests/etcd.yaml" ]; then
		log "the control-plane join failed after adding its etcd member; resuming after etcd-join if the member is a voter"
		resume() {
			if ! etcd_voter; then
				log "the local etcd member is not a started voter"
				return 1
			fi
			for phase in kubelet-wait-bootstrap "control-plane-join mark-control-plane" wait-control-plane; do
				# shellcheck disable=SC2086 # a phase and its sub-phase are two words
				kubeadm join phase $phase --config "$config" || return 1
			done
		}
		run_resume
	fi
	# The cluster's CAs and service-account keys, as CABPK wrote them (control planes only).
	pki=$kubernetes_dir/pki
	keep=$(mktemp -d)
	trap 'rm -rf "$keep"' EXIT # private keys: no copy outlives the script
	for f in ca.crt ca.key sa.key sa.pub front-proxy-ca.crt front-proxy-ca.key etcd/ca.crt etcd/ca.key; do
		[ -f "$pki/$f" ] && mkdir -p "$keep/$(dirname "$f")" && cp -p "$pki/$f" "$keep/$f"
	done
	resume() {
		kubeadm reset --force || return 1
		mkdir -p "$pki" && cp -pR "$keep/." "$pki/"
		kubeadm join --config "$config"
	}
	;;
*)
	log "unknown mode $mode"
	exit 2
	;;
esac

run_resume
