package nodetest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

type manifest struct {
	KubernetesVersion string   `json:"kubernetesVersion"`
	KernelArgs        string   `json:"kernelArgs"`
	CRISocket         string   `json:"criSocket"`
	Images            []string `json:"images"`
}

// env knobs: KNEST_NODETEST_CPUS, KNEST_NODETEST_MEMORY_MIB (control plane size),
// KNEST_NODETEST_WORKER=false (control plane only), KNEST_NODETEST_IGNORE_PREFLIGHT.
func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		return n
	}
	return def
}

func TestNodeImage(t *testing.T) {
	imageDir := os.Getenv("KNEST_NODE_IMAGE")
	if imageDir == "" {
		t.Fatal("KNEST_NODE_IMAGE is not set; run `make node-image-test`")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespace, tap devices)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "dnsmasq", "genisoimage", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install qemu-system-x86 qemu-utils dnsmasq-base genisoimage iproute2", tool)
		}
	}
	var m manifest
	b, err := os.ReadFile(filepath.Join(imageDir, "manifest.json"))
	if err != nil {
		t.Fatalf("no node image at %s (make node-image): %v", imageDir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	img := image{
		disk:    filepath.Join(imageDir, "disk.qcow2"),
		kernel:  filepath.Join(imageDir, "vmlinuz"),
		initrd:  filepath.Join(imageDir, "initrd.img"),
		cmdline: m.KernelArgs,
	}

	// What knest renders for a default NestedCluster: network, SANs, CRI socket and
	// the flannel manifest the ClusterResourceSet applies.
	nc := &knestv1.NestedCluster{}
	nc.Name, nc.Namespace = "nodetest", "default"
	nc.Spec.Version = m.KubernetesVersion
	cluster.Default(nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if graph.CNIConfigMap == nil {
		t.Fatal("the default NestedCluster renders no CNI")
	}
	var flannel string
	for _, v := range graph.CNIConfigMap.Data {
		flannel = v
	}

	work, err := os.MkdirTemp(os.Getenv("KNEST_NODETEST_DIR"), "knest-nodetest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work directory (consoles, dnsmasq log): %s", work)
	ctx := context.Background()
	n, err := newNetwork(ctx, work)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.close)

	cp := &vm{name: "nodetest-cp", mac: "52:54:00:4b:4e:11", ip: n.prefix + ".11",
		cpus: envInt(t, "KNEST_NODETEST_CPUS", 2), memMiB: envInt(t, "KNEST_NODETEST_MEMORY_MIB", 4096), dir: work}
	w1 := &vm{name: "nodetest-w1", mac: "52:54:00:4b:4e:12", ip: n.prefix + ".12", cpus: 2, memMiB: 2048, dir: work}
	if err := n.startDNSMasq(map[string]string{cp.mac: cp.ip, w1.mac: w1.ip}); err != nil {
		t.Fatal(err)
	}
	key, err := newSSHKey()
	if err != nil {
		t.Fatal(err)
	}

	// Certificates the way CAPI generates them for a new cluster.
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	hashes, err := certs.GetByPurpose(secret.ClusterCA).Hashes()
	if err != nil {
		t.Fatal(err)
	}
	in := kubeadmInput{
		ClusterName: nc.Name,
		Version:     m.KubernetesVersion,
		Endpoint:    cp.ip + ":6443",
		PodCIDR:     nc.Spec.Network.PodCIDR,
		ServiceCIDR: nc.Spec.Network.ServiceCIDR,
		DNSDomain:   nc.Spec.Network.DNSDomain,
		CertSANs:    append([]string{cp.ip}, graph.ControlPlane.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.CertSANs...),
		CRISocket:   graph.ControlPlane.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.CRISocket,
		Token:       bootstrapToken(t),
		CACertHash:  hashes[0],
	}
	if v := os.Getenv("KNEST_NODETEST_IGNORE_PREFLIGHT"); v != "" {
		in.IgnorePreflight = strings.Split(v, ",")
	}
	userData, err := initCloudConfig(certs.AsFiles(), in, key.public)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(work, cp.name+".user-data"), userData, 0o600)
	drive, err := configDrive(work, cp.name, userData)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.start(n, img, drive); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.stop)
	t.Logf("booting %s (%d vCPU, %d MiB)", cp.name, cp.cpus, cp.memMiB)

	kubectl := "sudo kubectl --kubeconfig /etc/kubernetes/admin.conf "
	waitFor(t, n, key, cp, "bootstrap-success", 40*time.Minute,
		"sudo cat /run/cluster-api/bootstrap-success.complete", func(out string) bool { return strings.TrimSpace(out) == "success" })

	// Cluster API creates worker machines once the control plane is initialized; so
	// does this test, and the worker boots while the control plane's checks run.
	withWorker := os.Getenv("KNEST_NODETEST_WORKER") != "false"
	if withWorker {
		joinData, err := joinCloudConfig(in, key.public)
		if err != nil {
			t.Fatal(err)
		}
		drive, err := configDrive(work, w1.name, joinData)
		if err != nil {
			t.Fatal(err)
		}
		if err := w1.start(n, img, drive); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w1.stop)
		t.Logf("booting %s (%d vCPU, %d MiB)", w1.name, w1.cpus, w1.memMiB)
	}

	// The ClusterResourceSet's job: apply the flannel manifest knest renders.
	if _, err := n.run(key, cp.ip, "echo "+base64.StdEncoding.EncodeToString([]byte(flannel))+" | base64 -d > /tmp/flannel.yaml && "+kubectl+"apply -f /tmp/flannel.yaml"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, n, key, cp, "node-ready", 20*time.Minute,
		kubectl+`get node `+cp.name+` -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'`, isTrue)
	waitFor(t, n, key, cp, "coredns-running", 20*time.Minute,
		kubectl+`-n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{.items[*].status.containerStatuses[*].ready}'`,
		func(out string) bool { f := strings.Fields(out); return len(f) > 0 && !strings.Contains(out, "false") })
	t.Logf("timings %s: %s", cp.name, formatTimings(cp.timings()))

	// A pod on the control plane (tolerating its taint) with a preloaded image and
	// pulls forbidden: it runs only because the image is already there.
	toolsImage := flannelImage(t, m.Images)
	corednsIP := strings.TrimSpace(mustRun(t, n, key, cp.ip, kubectl+`-n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{.items[0].status.podIP}'`))
	runPod(t, n, key, cp, kubectl, "probe-cp", cp.name, toolsImage, "nslookup kubernetes.default.svc."+in.DNSDomain+" "+corednsIP)

	if withWorker {
		waitFor(t, n, key, w1, "bootstrap-success", 30*time.Minute,
			"sudo cat /run/cluster-api/bootstrap-success.complete", func(out string) bool { return strings.TrimSpace(out) == "success" })
		waitFor(t, n, key, cp, "worker-ready", 20*time.Minute,
			kubectl+`get node `+w1.name+` -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'`, isTrue)
		w1.mark("node-ready")
		// Across nodes: a pod on the worker resolves through the CoreDNS pod on the
		// control plane (pod network over flannel's VXLAN) and through the DNS
		// Service (kube-proxy).
		runPod(t, n, key, cp, kubectl, "probe-w1", w1.name, toolsImage, "nslookup kubernetes.default.svc."+in.DNSDomain+" "+corednsIP)
		svcIP := strings.TrimSpace(mustRun(t, n, key, cp.ip, kubectl+`-n kube-system get svc kube-dns -o jsonpath='{.spec.clusterIP}'`))
		runPod(t, n, key, cp, kubectl, "probe-w1-svc", w1.name, toolsImage, "nslookup kubernetes.default.svc."+in.DNSDomain+" "+svcIP)
		t.Logf("timings %s: %s", w1.name, formatTimings(w1.timings()))
	}

	// Nothing came from a registry: containerd never pulled, and no guest even looked
	// a registry up (dnsmasq logs every query on the bridge).
	for _, v := range []*vm{cp, w1} {
		if v.cmd == nil {
			continue
		}
		out := mustRun(t, n, key, v.ip, "sudo journalctl -u containerd --no-pager | grep -c 'PullImage' || true")
		if pulls, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || pulls != 0 {
			diag, _ := n.run(key, v.ip, "uptime; df -h /; sudo journalctl -u containerd --no-pager | grep PullImage | tail -n 5; sudo dmesg | tail -n 20")
			t.Errorf("%s: containerd pull count %q (want 0):\n%s", v.name, out, diag)
		}
	}
	dns, _ := os.ReadFile(filepath.Join(work, "dnsmasq.log"))
	for _, reg := range []string{"registry.k8s.io", "ghcr.io", "docker.io", "quay.io", "pkg.dev"} {
		if strings.Contains(string(dns), reg) {
			t.Errorf("a guest looked up %s: see %s", reg, filepath.Join(work, "dnsmasq.log"))
		}
	}
	writeResults(t, work, []*vm{cp, w1})
}

func isTrue(out string) bool { return strings.TrimSpace(out) == "True" }

func bootstrapToken(t *testing.T) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b[:6]) + "." + string(b[6:])
}

func flannelImage(t *testing.T, images []string) string {
	for _, i := range images {
		if i == cluster.FlannelImage {
			return i
		}
	}
	t.Fatalf("the node image does not preload %s (it has %v)", cluster.FlannelImage, images)
	return ""
}

func mustRun(t *testing.T, n *network, key *sshKey, ip, cmd string) string {
	t.Helper()
	out, err := n.run(key, ip, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cmd on v's guest (or, for cluster checks, the control plane) until
// ok, records the milestone on v, and fails after timeout with the last output.
func waitFor(t *testing.T, n *network, key *sshKey, v *vm, milestone string, timeout time.Duration, cmd string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if v.cmd.ProcessState != nil {
			t.Fatalf("%s: qemu exited; see %s", v.name, v.console.Name())
		}
		out, err := n.run(key, v.ip, cmd)
		if err == nil && ok(out) {
			v.mark(milestone)
			t.Logf("%s: %s after %s", v.name, milestone, time.Since(v.started).Round(time.Second))
			return
		}
		last = out
		if err != nil {
			last = err.Error()
		}
		time.Sleep(3 * time.Second)
	}
	diag, _ := n.run(key, v.ip, "sudo kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -A -o wide; sudo journalctl -u kubelet --no-pager | tail -n 30")
	t.Fatalf("%s: no %s after %s; last: %s; console: %s\n%s", v.name, milestone, timeout, last, v.console.Name(), diag)
}

// runPod runs a pod with a preloaded image (imagePullPolicy Never) on node and
// waits for it to succeed.
func runPod(t *testing.T, n *network, key *sshKey, cp *vm, kubectl, name, node, image, command string) {
	t.Helper()
	args, _ := json.Marshal(append([]string{"/bin/busybox"}, strings.Fields(command)...))
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default"},"spec":{"restartPolicy":"Never","nodeSelector":{"kubernetes.io/hostname":%q},"tolerations":[{"operator":"Exists"}],"containers":[{"name":"probe","image":%q,"imagePullPolicy":"Never","command":%s}]}}`,
		name, node, image, args)
	mustRun(t, n, key, cp.ip, "echo '"+pod+"' | "+kubectl+"apply -f -")
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		// An API server under emulation times out now and then: poll through errors.
		out, err := n.run(key, cp.ip, kubectl+"get pod "+name+" -o jsonpath='{.status.phase}'")
		if err != nil {
			t.Logf("polling pod %s: %v", name, err)
			time.Sleep(3 * time.Second)
			continue
		}
		switch phase := strings.TrimSpace(out); phase {
		case "Succeeded":
			logs, _ := n.run(key, cp.ip, kubectl+"logs "+name)
			t.Logf("pod %s on %s succeeded: %s", name, node, strings.Join(strings.Fields(logs), " "))
			return
		case "Failed":
			logs, _ := n.run(key, cp.ip, kubectl+"logs "+name+"; "+kubectl+"describe pod "+name)
			t.Fatalf("pod %s on %s failed: %s", name, node, logs)
		}
		time.Sleep(3 * time.Second)
	}
	desc, _ := n.run(key, cp.ip, kubectl+"describe pod "+name)
	t.Fatalf("pod %s on %s did not finish: %s", name, node, desc)
}

func formatTimings(m map[string]time.Duration) string {
	type kv struct {
		k string
		d time.Duration
	}
	var l []kv
	for k, d := range m {
		l = append(l, kv{k, d})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].d < l[j].d })
	var parts []string
	for _, e := range l {
		parts = append(parts, fmt.Sprintf("%s=%.1fs", e.k, e.d.Seconds()))
	}
	return strings.Join(parts, " ")
}

// writeResults appends the run's milestones (seconds since qemu started) to
// $KNEST_CACHE/node-image/test-results.jsonl for docs/benchmark.md.
func writeResults(t *testing.T, work string, vms []*vm) {
	res := map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "work": work}
	for _, v := range vms {
		if v.cmd == nil {
			continue
		}
		ms := map[string]float64{}
		for k, d := range v.timings() {
			ms[k] = d.Seconds()
		}
		res[v.name] = map[string]any{"cpus": v.cpus, "memoryMiB": v.memMiB, "milestones": ms}
	}
	b, _ := json.Marshal(res)
	t.Logf("results: %s", b)
	if c := os.Getenv("KNEST_CACHE"); c != "" {
		f, err := os.OpenFile(filepath.Join(c, "node-image", "test-results.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s\n", b)
			f.Close()
		}
	}
}
