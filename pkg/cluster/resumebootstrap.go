package cluster

import (
	_ "embed"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// resumeBootstrapScript finishes a `kubeadm init` or `kubeadm join` that failed on
// timing; see the script for what it resumes and what it leaves alone.
// CABPK runs kubeadm once (its retrying join was removed in v1beta2), and on an
// oversubscribed host a failed init leaves a cluster that nothing recovers, a failed
// join a VM that waits for its health check's node startup timeout (20 minutes) to be
// replaced by another slow boot.
//
//go:embed scripts/resume-bootstrap.sh
var resumeBootstrapScript string

const resumeBootstrapPath = "/usr/local/sbin/knest-resume-bootstrap"

// resumeBootstrap is the script as a bootstrap file and the postKubeadmCommand that
// runs it (mode init or join). CABPK runs postKubeadmCommands whether kubeadm
// succeeded or not; the script does nothing when the sentinel is there.
func resumeBootstrap(mode string) (bootstrapv1.File, []string) {
	return bootstrapv1.File{
		Path:        resumeBootstrapPath,
		Owner:       "root:root",
		Permissions: "0755",
		Content:     resumeBootstrapScript,
	}, []string{resumeBootstrapPath + " " + mode}
}
