//go:build e2e

package tenant_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/e2e/internal/probe"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
)

// tenantClient is an admin client of a tenant cluster, from `knest kubeconfig`. The
// endpoint (the `<cluster>-lb` ClusterIP) is not reachable from this process: the
// suite port-forwards to the control-plane VM, as a user outside the host network
// would (knest kubeconfig --server).
func tenantClient(t *testing.T, key client.ObjectKey) tenant {
	t.Helper()
	if hostedControlPlane(t, key) {
		return hostedTenantClient(t, key)
	}
	return tenantClientVia(t, key, fmt.Sprintf("https://127.0.0.1:%d", portForward(t, key)))
}

// tenantClientVia is an admin client of a tenant cluster through server.
func tenantClientVia(t *testing.T, key client.ObjectKey, server string) tenant {
	t.Helper()
	tc, err := loadTenantClient(t.Context(), key, server)
	if err != nil {
		t.Fatal(err)
	}
	tenantStateOnFailure(t, key, tc)
	return tc
}

// loadTenantClient is tenantClientVia for polls: it returns its error.
func loadTenantClient(ctx context.Context, key client.ObjectKey, server string) (tenant, error) {
	path := filepath.Join(s.stateDir, key.Namespace+"-"+key.Name+".kubeconfig")
	args := []string{"kubeconfig", key.Name, "-n", key.Namespace, "--output-file", path, "--server", server}
	if out, err := knestCmdQuiet(ctx, args...); err != nil {
		return tenant{}, fmt.Errorf("knest kubeconfig: %v: %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return tenant{}, err
	}
	cfg.Timeout = 30 * time.Second
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return tenant{}, err
	}
	return tenant{Client: c, cfg: cfg}, nil
}

// tenant is an admin client of a tenant cluster and its config.
type tenant struct {
	client.Client
	cfg *rest.Config
}

// portForward listens on a local port and forwards each connection to port 6443 of
// a running control-plane VMI, looked up per connection so that the forward follows
// the control plane when an upgrade replaces its machine. A pod port-forward would
// not do: the guest owns the virt-launcher pod's IP, not its localhost.
func portForward(t *testing.T, key client.ObjectKey) int {
	t.Helper()
	ctx := t.Context()
	if _, err := controlPlaneVMI(ctx, key); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				vmi, err := controlPlaneVMI(ctx, key)
				if err != nil {
					t.Logf("port-forward: %v", err)
					return
				}
				ws, err := vmiPortForward(ctx, vmi, cluster.APIServerPort)
				if err != nil {
					t.Logf("port-forward to %s: %v", vmi.Name, err)
					return
				}
				defer ws.Close()
				splice(c, ws)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// controlPlaneVMI returns a running control-plane VMI of the cluster that is not
// being deleted.
func controlPlaneVMI(ctx context.Context, key client.ObjectKey) (*kubevirtv1.VirtualMachineInstance, error) {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: key.Name, "cluster.x-k8s.io/role": "control-plane",
	}); err != nil {
		return nil, fmt.Errorf("listing the control-plane VMIs of %s: %w", key, err)
	}
	for i, vmi := range vmis.Items {
		if vmi.Status.Phase == kubevirtv1.Running && vmi.DeletionTimestamp.IsZero() {
			return &vmis.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no running control-plane VMI of %s", key)
}

// vmiPortForward opens a connection to a port of a VMI through KubeVirt's
// portforward subresource (what `virtctl port-forward` uses: a websocket with
// subprotocol plain.kubevirt.io carrying the raw bytes). Written here rather than
// with kubevirt.io/client-go, which would bring its whole dependency tree into the
// main module for one test helper.
func vmiPortForward(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, port int) (*websocket.Conn, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	u.Path = fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/portforward/%d/tcp", vmi.Namespace, vmi.Name, port)
	header := http.Header{}
	if cfg.BearerToken != "" {
		header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	dialer := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{"plain.kubevirt.io"}, HandshakeTimeout: 30 * time.Second}
	ws, rsp, err := dialer.DialContext(ctx, u.String(), header)
	if rsp != nil {
		rsp.Body.Close()
	}
	return ws, err
}

// splice copies between c and ws until either side ends; the caller closes both.
func splice(c net.Conn, ws *websocket.Conn) {
	go func() {
		buf := make([]byte, 32*1024)
		for {
			n, err := c.Read(buf)
			if n > 0 && ws.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
				return
			}
			if err != nil {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				return
			}
		}
	}()
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return
		}
		if _, err := io.Copy(c, r); err != nil {
			return
		}
	}
}

func expectNodesReady(t *testing.T, tc tenant, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		nodes := &corev1.NodeList{}
		g.Expect(tc.List(t.Context(), nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(n))
		for _, node := range nodes.Items {
			g.Expect(node.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "node %s", node.Name)
			g.Expect(node.Spec.ProviderID).To(HavePrefix("kubevirt://"), "node %s", node.Name)
		}
	}, tenantTimeout, poll).Should(Succeed())
}

// expectAddonsRunning: every DaemonSet (kube-proxy, the CNI, the CSI node plugin)
// runs on all n nodes, every Deployment (CoreDNS) is available, and no node keeps the
// startup taint its CSI plugin's registration removes.
func expectAddonsRunning(t *testing.T, tc tenant, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		nodes := &corev1.NodeList{}
		g.Expect(tc.List(t.Context(), nodes)).To(Succeed())
		for _, node := range nodes.Items {
			g.Expect(startuptaint.HasTaint(&node)).To(BeFalse(), "node %s keeps the taint %s", node.Name, startuptaint.Taint.Key)
		}
		dss := &appsv1.DaemonSetList{}
		g.Expect(tc.List(t.Context(), dss)).To(Succeed())
		g.Expect(len(dss.Items)).To(BeNumerically(">=", 2), "kube-proxy and the CNI")
		for _, ds := range dss.Items {
			g.Expect(ds.Status.NumberReady).To(BeEquivalentTo(n), "DaemonSet %s/%s", ds.Namespace, ds.Name)
		}
		deps := &appsv1.DeploymentList{}
		g.Expect(tc.List(t.Context(), deps, client.InNamespace("kube-system"))).To(Succeed())
		g.Expect(deps.Items).NotTo(BeEmpty())
		for _, d := range deps.Items {
			g.Expect(d.Status.AvailableReplicas).To(Equal(ptr.Deref(d.Spec.Replicas, 1)), "Deployment %s", d.Name)
		}
	}, tenantTimeout, poll).Should(Succeed())
}

// The tenant's workload: busybox from an image every node has (no registry here).
const echoName = "echo"

// hostNames are Services of the kind host that a tenant must not be able to look up.
const hostNames = "kubernetes.default.svc.cluster.local virt-api.kubevirt.svc.cluster.local kube-dns.kube-system.svc.cluster.local"

// expectServiceAnswers deploys (once) an HTTP Deployment with a Service, then has a
// pod fetch it by its DNS name: CoreDNS, kube-proxy and the CNI across nodes work.
func expectServiceAnswers(t *testing.T, tc tenant, replicas int32) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	labels := map[string]string{"app": echoName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: echoName, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// busybox httpd as PID 1 ignores SIGTERM: without this every drain
					// waits out the default 30 s.
					TerminationGracePeriodSeconds: ptr.To(int64(1)),
					// Spread, so a scale-down has a replica to move.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "httpd", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/bin/busybox", "sh", "-c",
							"mkdir -p /tmp/www && echo hello from $(hostname) > /tmp/www/index.html && exec /bin/busybox httpd -f -p 8080 -h /tmp/www"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: echoName, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	// Creates are retried: a control plane busy with a booting node can time out a
	// request it then carries out, and the retry finds the object there.
	for _, o := range []client.Object{dep, svc} {
		g.Eventually(func() error {
			return client.IgnoreAlreadyExists(tc.Create(ctx, o.DeepCopyObject().(client.Object)))
		}, tenantTimeout, poll).Should(Succeed(), "creating %T", o)
	}
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(dep), d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(Equal(replicas))
	}, tenantTimeout, poll).Should(Succeed())

	probe := &corev1.Pod{
		// Named here, not by the API server, so that a retried create cannot make two.
		ObjectMeta: metav1.ObjectMeta{Name: "probe-" + utilrand.String(5), Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{
				Name: "wget", Image: cluster.FlannelImage, ImagePullPolicy: corev1.PullNever,
				// Retried in the container every 2 s until it answers: a new node's DNS
				// and Service routes can take minutes, and the kubelet's restart
				// back-off (up to 5 minutes a wait) would add as much again. timeout,
				// not wget -T: Debian's static busybox crashes with -T.
				// Then the tenant's DNS: its own names resolve, the host's do not (the
				// VMs' resolver is the guest DNS, which knows nothing of the host).
				Command: []string{"/bin/busybox", "sh", "-c",
					"until /bin/busybox timeout 10 /bin/busybox wget -q -O - http://" + echoName + "; do sleep 2; done; " +
						"/bin/busybox nslookup kubernetes.default.svc." + knestv1.DefaultDNSDomain + " >/dev/null 2>&1 && echo tenant name resolved; " +
						"for name in " + hostNames + "; do /bin/busybox nslookup $name >/dev/null 2>&1 && echo host name resolved: $name; done; echo " + probeDone},
			}},
		},
	}
	g.Eventually(func() error {
		return client.IgnoreAlreadyExists(tc.Create(ctx, probe.DeepCopy()))
	}, tenantTimeout, poll).Should(Succeed(), "creating the probe pod")
	// Its log, not its phase, says it is done: the kubelet reports the phase only once
	// it has torn the pod down, and on an emulated worker containerd's 10 s for
	// removing an exited container's task can run out again and again, holding the
	// phase at Running for minutes after the work is done.
	var logs string
	g.Eventually(func(g Gomega) {
		var err error
		logs, err = logsOf(ctx, tc, probe)
		g.Expect(err).NotTo(HaveOccurred(), "the log of probe pod %s", probe.Name)
		g.Expect(logs).To(ContainSubstring(probeDone), "probe pod %s is not done", probe.Name)
	}, tenantTimeout, poll).Should(Succeed())
	g.Expect(logs).To(ContainSubstring("hello from "+echoName), "the probe's output")
	g.Expect(logs).To(ContainSubstring("tenant name resolved"), "the probe's output")
	g.Expect(logs).NotTo(ContainSubstring("host name resolved"), "a tenant pod looks up the host's Services")
	_ = tc.Delete(ctx, probe)
}

// probeDone is the last line of the probe pod's log.
const probeDone = "probe done"

// podLogs reads a pod's logs through the tenant API.
func podLogs(t *testing.T, tc tenant, pod *corev1.Pod) string {
	t.Helper()
	logs, err := logsOf(t.Context(), tc, pod)
	if err != nil {
		t.Fatalf("logs of %s: %v", pod.Name, err)
	}
	return logs
}

// nodeOfPod returns a worker node that runs a pod of the app.
func nodeOfPod(t *testing.T, tc tenant, app string) string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := tc.List(t.Context(), pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			return p.Spec.NodeName
		}
	}
	t.Fatalf("no running pod of %s", app)
	return ""
}

func knestCmdQuiet(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, s.knest, append([]string{"--kubeconfig", s.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// restartControllerDuringCreate kills knest's controller once the control plane's
// VM exists, by deleting its pod, which its Deployment replaces.
func restartControllerDuringCreate(t *testing.T, ctx context.Context, key client.ObjectKey, start time.Time) {
	for ctx.Err() == nil {
		vms := &kubevirtv1.VirtualMachineList{}
		if s.host.List(ctx, vms, client.InNamespace(key.Namespace)) == nil && len(vms.Items) > 0 {
			break
		}
		time.Sleep(time.Second)
	}
	// Delete the controller's pod; its Deployment starts another.
	if _, err := deletePods(ctx, "knest-system", map[string]string{"app.kubernetes.io/name": "knest-controller"}); err != nil {
		t.Errorf("deleting the controller's pod: %v", err)
	}
	s.timeline.add("create alpha", "controller restarted", time.Since(start))
}

// expectIsolated: each cluster has its own certificate authority, and neither's
// nodes reach the other's endpoint or VMs.
func expectIsolated(t *testing.T, a, b client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	ca := func(k client.ObjectKey) []byte {
		sec := &corev1.Secret{}
		g.Expect(s.host.Get(t.Context(), client.ObjectKey{Namespace: k.Namespace, Name: k.Name + "-ca"}, sec)).To(Succeed())
		return sec.Data["tls.crt"]
	}
	g.Expect(ca(a)).NotTo(Equal(ca(b)), "the two clusters have their own CAs")
	for _, pair := range [][2]client.ObjectKey{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		cfg := rest.CopyConfig(tenantClient(t, own).cfg)
		svc := &corev1.Service{}
		g.Expect(s.host.Get(t.Context(), client.ObjectKey{Namespace: other.Namespace, Name: other.Name + "-lb"}, svc)).To(Succeed())
		cfg.Host = "https://" + svc.Spec.ClusterIP + ":6443"
		cfg.ServerName = ""
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.Discovery().ServerVersion()
		g.Expect(err).To(HaveOccurred(), "%s's credentials must not work on %s's endpoint", own, other)
	}
	// The network: from a tenant's node, its own endpoint answers (proving the probe
	// works) and nothing of the other tenant does (knest's NetworkPolicy).
	for _, pair := range [][2]client.ObjectKey{{a, b}, {b, a}} {
		own, other := pair[0], pair[1]
		tc := tenantClient(t, own)
		g.Expect(canReach(t, tc, endpointIP(t, own), 6443)).To(BeTrue(), "%s's nodes reach their own endpoint", own)
		g.Expect(canConnect(t, tc, endpointIP(t, other), 6443)).To(BeFalse(), "%s's nodes reach %s's endpoint", own, other)
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		g.Expect(s.host.List(t.Context(), vmis, client.InNamespace(other.Namespace))).To(Succeed())
		g.Expect(vmis.Items).NotTo(BeEmpty())
		for _, vmi := range vmis.Items {
			port := 10250 // kubelet
			if vmi.Labels["cluster.x-k8s.io/role"] == "control-plane" {
				port = 6443
			}
			g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
			g.Expect(canConnect(t, tc, vmi.Status.Interfaces[0].IP, port)).To(BeFalse(), "%s's nodes reach %s's VM %s", own, other, vmi.Name)
		}
	}
}

func endpointIP(t *testing.T, k client.ObjectKey) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := s.host.Get(t.Context(), client.ObjectKey{Namespace: k.Namespace, Name: k.Name + "-lb"}, svc); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// canConnect reports whether a TCP connection from a tenant node (a host-network
// pod, so the packets leave with the node's address) to addr:port succeeds.
func canConnect(t *testing.T, tc tenant, addr string, port int) bool {
	t.Helper()
	return probe.Connect(t, tc.Client, fromNode(tc), addr, port)
}

// canReach is canConnect for a connection that must go through (probe.Reaches).
func canReach(t *testing.T, tc tenant, addr string, port int) bool {
	t.Helper()
	return probe.Reaches(t, tc.Client, fromNode(tc), addr, port)
}

// fromNode: a host-network pod of the tenant, whose packets leave with its node's
// address; its result is read from its log.
func fromNode(tc tenant) probe.Client {
	return probe.Client{Namespace: "default", HostNetwork: true, Logs: func(ctx context.Context, pod *corev1.Pod) (string, error) {
		return logsOf(ctx, tc, pod)
	}}
}

// expectIsolatedFromHostPods checks that the host cluster's own NetworkPolicy enforcer
// enforces knest's NetworkPolicy between a tenant's VMs and a plain pod of another
// namespace standing in for another tenant: the pod reaches the API server port
// (open to all) but not a kubelet or etcd, and the tenant's nodes cannot reach the pod's
// server, which a pod of its own namespace can (proving the server and the probe work).
func expectIsolatedFromHostPods(t *testing.T, key client.ObjectKey) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	t.Cleanup(func() {
		_ = s.host.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	other := probe.Client{Namespace: ns}
	server := probe.Server(t, s.host, ns, "server", nil)
	g.Expect(probe.Reaches(t, s.host, other, server, probe.ServerPort)).To(BeTrue(), "a pod of its own namespace reaches the server")

	tc := tenantClient(t, key)
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	g.Expect(s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name})).To(Succeed())
	g.Expect(vmis.Items).NotTo(BeEmpty())
	for _, vmi := range vmis.Items {
		g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
		ip := vmi.Status.Interfaces[0].IP
		if vmi.Labels["cluster.x-k8s.io/role"] == "control-plane" {
			g.Expect(probe.Reaches(t, s.host, other, ip, probe.APIPort)).To(BeTrue(), "another namespace's pod reaches %s's API server port", vmi.Name)
			// etcd answers on the VM's address inside the tenant, so a refusal from
			// outside is the policy's.
			g.Expect(canReach(t, tc, ip, etcdClientPort)).To(BeTrue(), "%s's etcd listens on %s", vmi.Name, ip)
			g.Expect(probe.Connect(t, s.host, other, ip, etcdClientPort)).To(BeFalse(), "another namespace's pod reaches %s's etcd", vmi.Name)
		}
		g.Expect(probe.Connect(t, s.host, other, ip, 10250)).To(BeFalse(), "another namespace's pod reaches %s's kubelet", vmi.Name)
	}
	g.Expect(canConnect(t, tc, server, probe.ServerPort)).To(BeFalse(), "%s's nodes reach a pod of another namespace", key)
}

// etcdClientPort is where kubeadm's etcd serves clients, on the node's address too.
const etcdClientPort = 2379

// vmKill is how a worker's VM dies from outside.
type vmKill string

const (
	// killQemu sends SIGKILL to qemu inside the VM's virt-launcher pod, which the
	// pod then outlives.
	killQemu vmKill = "qemu killed"
	// deleteLauncherPod deletes the VM's virt-launcher pod at once.
	deleteLauncherPod vmKill = "launcher pod deleted"
)

// killWorkerAndExpectRejoin kills a worker's VM from outside and expects the same
// node back: KubeVirt starts the VM again (runStrategy Always) from a fresh disk,
// cloud-init runs its `kubeadm join` again with the token knest keeps valid
// (internal/controller/jointoken), and the node comes back under its name with a
// new boot ID, its Machine kept.
func killWorkerAndExpectRejoin(t *testing.T, key client.ObjectKey, how vmKill) {
	g := NewWithT(t)
	phase := "worker VM killed: " + string(how)
	ctx, cancel := context.WithTimeout(t.Context(), createTimeout)
	defer cancel()
	start := time.Now()
	vms := &kubevirtv1.VirtualMachineInstanceList{}
	g.Expect(s.host.List(ctx, vms, client.InNamespace(key.Namespace), client.MatchingLabels{"cluster.x-k8s.io/role": "worker"})).To(Succeed())
	g.Expect(vms.Items).NotTo(BeEmpty())
	victim := &vms.Items[0]
	tc := tenantClient(t, key)
	node := &corev1.Node{}
	g.Expect(tc.Get(ctx, client.ObjectKey{Name: victim.Name}, node)).To(Succeed())
	bootID := node.Status.NodeInfo.BootID
	machine := killWorker(t, ctx, key, victim, how)
	s.timeline.add(phase, string(how), 0)
	expectRejoined(t, ctx, key, tc, victim.Name, bootID)
	g.Expect(machineOfNode(t, key, victim.Name)).To(Equal(machine), "the node's Machine")
	s.timeline.add(phase, "the same node Ready again, rebooted", time.Since(start))
	expectNodesReady(t, tc, 2)
}

// expectRejoined waits until the tenant node name, its VM started again, is Ready
// with another boot ID than bootID.
func expectRejoined(t *testing.T, ctx context.Context, key client.ObjectKey, tc tenant, name, bootID string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		node := &corev1.Node{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		g.Expect(node.Status.NodeInfo.BootID).NotTo(Equal(bootID), "node %s not rebooted yet", name)
		g.Expect(node.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "node %s", name)
	}, createTimeout, poll).Should(Succeed(), "%s's node %s joined again", key, name)
}

// killWorker kills a worker VM from outside; KubeVirt starts it again. It returns
// the Machine's name.
func killWorker(t *testing.T, ctx context.Context, key client.ObjectKey, victim *kubevirtv1.VirtualMachineInstance, how vmKill) string {
	t.Helper()
	g := NewWithT(t)
	machine := machineOfNode(t, key, victim.Name)
	pods := &corev1.PodList{}
	g.Expect(s.host.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(victim.UID)})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "virt-launcher pods of %s", victim.Name)
	pod := &pods.Items[0]
	switch how {
	case killQemu:
		out, err := execInPod(ctx, pod, "compute", "pkill", "-KILL", "-e", "qemu-system")
		g.Expect(err).NotTo(HaveOccurred(), "killing qemu in %s: %s", pod.Name, out)
		t.Logf("in %s: %s", pod.Name, strings.TrimSpace(out))
	case deleteLauncherPod:
		g.Expect(s.host.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	default:
		t.Fatalf("unknown way to kill a VM: %s", how)
	}
	return machine
}

// execInPod runs a command in a container of a host pod (kubectl exec) and returns
// its output.
func execInPod(ctx context.Context, pod *corev1.Pod, container string, command ...string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	return out.String(), err
}

// expectJoinTokensKept: the bootstrap token of each of key's workers, in its
// KubeadmConfig and so in its VM's user data, is still valid in the tenant and
// authenticates there as kubeadm's join group. CABPK lets it expire 15 minutes after
// the join, and the token cleaner then deletes it; knest keeps it
// (internal/controller/jointoken), so that a VM started again from its fresh disk
// joins as the same node. Checked late in a run, well past those 15 minutes, after a
// restore that may have put back an older expiry: a kept token has at least 7.5
// minutes left at any time, so a minute is asked for.
func expectJoinTokensKept(t *testing.T, key client.ObjectKey, tc tenant) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	machines := &clusterv1.MachineList{}
	g.Expect(s.host.List(ctx, machines, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name})).To(Succeed())
	checked := 0
	for _, m := range machines.Items {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp || !m.Status.NodeRef.IsDefined() {
			continue
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		g.Expect(s.host.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg)).To(Succeed())
		token := cfg.Spec.JoinConfiguration.Discovery.BootstrapToken.Token
		id, _, ok := strings.Cut(token, ".")
		g.Expect(ok).To(BeTrue(), "KubeadmConfig %s has no bootstrap token", cfg.Name)
		secret := &corev1.Secret{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: bootstrapapi.BootstrapTokenSecretPrefix + id}, secret)).
			To(Succeed(), "the bootstrap token of %s (joined %s)", m.Name, m.Status.NodeRef.Name)
		expires, err := time.Parse(time.RFC3339, string(secret.Data[bootstrapapi.BootstrapTokenExpirationKey]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(expires).To(BeTemporally(">", time.Now().Add(time.Minute)), "the bootstrap token of %s", m.Name)
		cfgAs := rest.AnonymousClientConfig(tc.cfg)
		cfgAs.BearerToken = token
		// A new connection, unlike tc's: retried for a moment in case the Service
		// has just taken its API server back; a token that does not authenticate
		// fails every try.
		g.Eventually(func(g Gomega) {
			review, err := kubernetes.NewForConfigOrDie(cfgAs).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the bootstrap token of %s authenticates", m.Name)
			g.Expect(review.Status.UserInfo.Groups).To(ContainElement("system:bootstrappers:kubeadm:default-node-token"))
		}, time.Minute, poll).Should(Succeed())
		checked++
	}
	g.Expect(checked).To(BeNumerically(">", 0), "joined workers of %s", key)
}
