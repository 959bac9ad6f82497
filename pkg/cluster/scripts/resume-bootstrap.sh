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
#   join  A worker's join that timed out (discovery, TLS bootstrap) is reset and run
#         again. Control-plane joins are left to KCP's remediation.
#
# Writes CABPK's sentinel on success, which is what CAPK's bootstrap check reads.
set -u

mode=${1:?usage: knest-resume-bootstrap init|join}
sentinel=${KNEST_SENTINEL:-/run/cluster-api/bootstrap-success.complete}
kubeadm_dir=${KNEST_KUBEADM_DIR:-/run/kubeadm}
kubernetes_dir=${KNEST_KUBERNETES_DIR:-/etc/kubernetes}
attempts=${KNEST_RESUME_ATTEMPTS:-5}
delay=${KNEST_RESUME_DELAY:-30}

log() { echo "knest-resume-bootstrap: $*" >&2; }

[ -f "$sentinel" ] && exit 0

case $mode in
init)
	config=$kubeadm_dir/kubeadm.yaml
	[ -f "$config" ] || exit 0 # a control-plane join: KCP remediates those
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
	resume() { kubeadm reset --force && kubeadm join --config "$config"; }
	;;
*)
	log "unknown mode $mode"
	exit 2
	;;
esac

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
