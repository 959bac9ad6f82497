// Package probe runs the pods the end-to-end suites test networks with: a server
// answering TCP on two ports, and a client that reports whether a connection went
// through. Both use flannel's image (busybox inside), which tenant nodes and the kind
// node have preloaded, so nothing is pulled.
package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cluster"
)

// Ports the server answers on: an ordinary one and the API server's, which knest's
// isolation policy treats apart.
const (
	ServerPort = 8080
	APIPort    = cluster.APIServerPort
)

const (
	timeout = 15 * time.Minute
	poll    = 2 * time.Second
)

// Server runs busybox httpd on ServerPort and APIPort in a pod with the given labels
// and returns the pod's IP once it runs.
func Server(t *testing.T, c client.Client, namespace, name string, labels map[string]string) string {
	t.Helper()
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "httpd", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"/bin/busybox", "sh", "-c", fmt.Sprintf(
				"mkdir -p /w && echo ok >/w/index.html && /bin/busybox httpd -p %d -h /w && exec /bin/busybox httpd -f -p %d -h /w",
				APIPort, ServerPort)},
		}}},
	}
	g.Expect(c.Create(t.Context(), pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
	}, timeout, poll).Should(Succeed())
	return pod.Status.PodIP
}

// Client is where a connection is tried from.
type Client struct {
	Namespace   string
	Labels      map[string]string
	HostNetwork bool // a node's own address, not a pod's
	// Settle waits before connecting: an enforcer fences a new pod that a policy
	// selects only once it has seen it, while the pods it stands in for are long-lived.
	Settle time.Duration
	// Logs, when set, reads a pod's log, and the result is taken from the line the
	// client prints as soon as it is there: on an emulated node the kubelet can report
	// an exited container minutes late, when containerd's fixed 10 s for deleting its
	// task runs out again and again.
	Logs func(ctx context.Context, pod *corev1.Pod) (string, error)
}

// The lines the client prints with its result.
const (
	connected = "connected"
	refused   = "refused"
)

// Connect runs a pod that opens a TCP connection to addr:port and reports whether it
// got through within 10 seconds.
func Connect(t *testing.T, c client.Client, from Client, addr string, port int) bool {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "connect-", Namespace: from.Namespace, Labels: from.Labels},
		Spec: corev1.PodSpec{
			HostNetwork:   from.HostNetwork,
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "nc", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
				// Succeeds once connected (the server hangs up on the stray newline);
				// fails when the connection is refused or times out.
				Command: []string{"/bin/busybox", "sh", "-c", fmt.Sprintf(
					"sleep %d; if echo | /bin/busybox nc -w 10 %s %d; then echo %s; else echo %s; exit 1; fi",
					int(from.Settle.Seconds()), addr, port, connected, refused)},
			}},
		},
	}
	g.Expect(c.Create(ctx, pod)).To(Succeed())
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), pod) }()
	var ok bool
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		if exit := exitCode(pod); exit != nil {
			ok = *exit == 0
			return
		}
		g.Expect(from.Logs).NotTo(BeNil(), "pod %s has not finished", pod.Name)
		logs, err := from.Logs(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred(), "the log of pod %s", pod.Name)
		g.Expect(logs).To(Or(ContainSubstring(connected), ContainSubstring(refused)), "pod %s has not finished", pod.Name)
		ok = strings.Contains(logs, connected)
	}, timeout, poll).Should(Succeed())
	t.Logf("connect to %s:%d from %s (labels %v, host network %v): connected %v", addr, port, from.Namespace, from.Labels, from.HostNetwork, ok)
	return ok
}

// exitCode is the client's exit code once it has finished: from its container's
// terminated state, which the kubelet reports before the pod's phase (on an emulated
// node the phase followed minutes later), or else from the phase.
func exitCode(pod *corev1.Pod) *int32 {
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Terminated != nil {
			return &st.State.Terminated.ExitCode
		}
	}
	var code int32
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return &code
	case corev1.PodFailed:
		code = 1
		return &code
	}
	return nil
}

// Reaches is Connect for a connection that must go through: it tries up to three
// times, since a server that has just started or restarts may refuse once, while a
// connection a policy drops fails every time. Connections that must not go through
// take Connect: one success is enough to fail.
func Reaches(t *testing.T, c client.Client, from Client, addr string, port int) bool {
	t.Helper()
	for range 3 {
		if Connect(t, c, from, addr, port) {
			return true
		}
	}
	return false
}
