package probe

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The client's result comes from its container as soon as the kubelet reports it
// terminated, whatever the pod's phase still says, and from the phase otherwise.
func TestExitCode(t *testing.T) {
	g := NewWithT(t)
	terminated := func(code int32) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	}
	running := []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	for _, c := range []struct {
		name     string
		status   corev1.PodStatus
		finished bool
		code     int32
	}{
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, false, 0},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: running}, false, 0},
		{"connected, phase still Running", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: terminated(0)}, true, 0},
		{"refused, phase still Running", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: terminated(1)}, true, 1},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded}, true, 0},
		{"failed without a container status", corev1.PodStatus{Phase: corev1.PodFailed}, true, 1},
	} {
		code := exitCode(&corev1.Pod{Status: c.status})
		if !c.finished {
			g.Expect(code).To(BeNil(), c.name)
			continue
		}
		g.Expect(code).To(HaveValue(Equal(c.code)), c.name)
	}
}
