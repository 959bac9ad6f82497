package create_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/cmd/knest/app"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/validation"
)

// run runs knest with args and no kubeconfig anywhere, so a command that got past
// input validation to the host cluster fails with "no kubeconfig".
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing"))
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	err = app.RunContext(context.Background(), cli.NewLogger(&errOut, 0).Logr(), streams, args)
	return out.String(), errOut.String(), err
}

func TestCreateRejectsInvalidInput(t *testing.T) {
	manifest := func(extra string) string {
		return "apiVersion: knest.dev/v1alpha1\nkind: NestedCluster\nmetadata:\n  name: demo\n" + extra
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{name: "no name", args: []string{}, want: "a cluster needs a name: knest create NAME"},
		{name: "two names", args: []string{"a", "b"}, want: "accepts at most 1 arg(s)"},
		{name: "name with upper case", args: []string{"Demo"}, want: `NAME: Invalid value: "Demo": must be a DNS label`},
		{name: "name too long", args: []string{strings.Repeat("a", 31)}, want: "must have at most 30 characters"},
		{name: "even control plane", args: []string{"demo", "--control-plane", "2"}, want: "--control-plane: Invalid value: 2: must be 1, 3, 5 or 7"},
		{name: "control plane zero", args: []string{"demo", "--control-plane", "0"}, want: "--control-plane 0: the control plane needs 1, 3, 5 or 7 nodes"},
		{name: "control plane one CPU", args: []string{"demo", "--control-plane-cpu", "1"}, want: "--control-plane-cpu 1: a control-plane node needs at least 2 vCPUs"},
		{name: "control plane little memory", args: []string{"demo", "--control-plane-memory", "1Gi"}, want: "--control-plane-memory: Invalid value: \"1Gi\": must be at least 1700Mi"},
		{name: "memory not a quantity", args: []string{"demo", "--worker-memory", "4GB"}, want: `--worker-memory "4GB": memory must be a quantity such as 4Gi`},
		{name: "memory zero", args: []string{"demo", "--worker-memory", "0"}, want: "--worker-memory \"0\" must be positive"},
		{name: "etcd volume too small", args: []string{"demo", "--etcd-size", "512Mi"}, want: `--etcd-size: Invalid value: "512Mi": controlPlane.etcd.size must be from 1Gi to 64Gi`},
		{name: "etcd ephemeral with a class", args: []string{"demo", "--etcd-ephemeral", "--etcd-storage-class", "fast"}, want: "etcd.ephemeral keeps etcd off any volume"},
		{name: "worker little memory", args: []string{"demo", "--worker-memory", "512Mi"}, want: "--worker-memory: Invalid value: \"512Mi\": a worker pool's memory must be at least 1Gi"},
		{name: "worker zero CPUs", args: []string{"demo", "--worker-cpu", "0"}, want: "--worker-cpu 0: a worker node needs at least 1 vCPU"},
		{name: "worker 200 CPUs", args: []string{"demo", "--worker-cpu", "200"}, want: "--worker-cpu: Invalid value: 200: must be from 1 to 128"},
		{name: "negative workers", args: []string{"demo", "--workers", "-1"}, want: "--workers -1: a pool has from 0 to 200 nodes"},
		{name: "too many workers", args: []string{"demo", "--workers", "201"}, want: "--workers/--pool: Invalid value: 201: must be from 0 to 200"},
		{name: "workers not a number", args: []string{"demo", "--workers", "two"}, want: `invalid argument "two" for "--workers"`},
		{name: "pool without count", args: []string{"demo", "--pool", "gpu"}, want: `--pool: pool "gpu" must look like NAME=COUNT`},
		{name: "pool with bad count", args: []string{"demo", "--pool", "gpu=x"}, want: `the count "x" is not a whole number`},
		{name: "pool with bad name", args: []string{"demo", "--pool", "GPU=1"}, want: "must be a DNS label"},
		{name: "pool name too long", args: []string{"demo", "--pool", "a-very-long-pool=1"}, want: "at most 15 characters"},
		{name: "pool given twice", args: []string{"demo", "--pool", "gpu=1", "--pool", "gpu=2"}, want: "pool gpu is given twice"},
		{name: "workers and pool workers", args: []string{"demo", "--workers", "2", "--pool", "workers=3"}, want: "--workers and --pool workers=... both size the pool workers"},
		{name: "pod CIDR not a CIDR", args: []string{"demo", "--pod-cidr", "10.0.0.0"}, want: "--pod-cidr: Invalid value: \"10.0.0.0\": must be an IPv4 CIDR with a prefix from /8 to /24"},
		{name: "service CIDR too wide", args: []string{"demo", "--service-cidr", "10.0.0.0/8"}, want: "--service-cidr: Invalid value: \"10.0.0.0/8\": must be an IPv4 CIDR with a prefix from /12 to /24"},
		{name: "CIDRs overlap", args: []string{"demo", "--service-cidr", "10.243.16.0/20"}, want: "--pod-cidr/--service-cidr: Invalid value: \"10.243.0.0/16 and 10.243.16.0/20\": network.podCIDR and network.serviceCIDR must not overlap"},
		{name: "DNS domain", args: []string{"demo", "--dns-domain", "Tenant_local"}, want: "--dns-domain: Invalid value: \"Tenant_local\": network.dnsDomain must be a DNS name"},
		{name: "unknown CNI", args: []string{"demo", "--cni", "calico"}, want: `--cni "calico": use one of flannel, none`},
		{name: "unknown service type", args: []string{"demo", "--service-type", "ExternalName"}, want: `--service-type "ExternalName": use one of ClusterIP, NodePort, LoadBalancer`},
		{name: "unknown root disk", args: []string{"demo", "--root-disk", "pvc"}, want: `--root-disk "pvc": use containerdisk (ephemeral) or datavolume (persistent)`},
		{name: "datavolume without size", args: []string{"demo", "--root-disk", "datavolume"}, want: "--root-disk datavolume needs --disk-size, e.g. --disk-size 20Gi"},
		{name: "disk size without datavolume", args: []string{"demo", "--disk-size", "20Gi"}, want: "--disk-size only applies with --root-disk datavolume"},
		{name: "disk size not a quantity", args: []string{"demo", "--root-disk", "datavolume", "--disk-size", "20 GB"}, want: `--disk-size "20 GB": rootDisk.size must be a quantity such as 20Gi`},
		{name: "version out of range", args: []string{"demo", "--version", "1.27.3"}, want: "--version: Invalid value: \"v1.27.3\": version must look like v1.MINOR.PATCH with a minor from 30 to 36"},
		{name: "cert SAN list", args: []string{"demo", "--cert-san", "a.example,b.example"}, want: `--cert-san "a.example,b.example": give one DNS name or IP per flag`},
		{name: "API host too long", args: []string{"demo", "--api-host", strings.Repeat("a", 254)}, want: "--api-host: Too long"},
		{name: "output without dry run", args: []string{"demo", "-o", "yaml"}, want: "-o/--output only applies with --dry-run"},
		{name: "graph without dry run", args: []string{"demo", "--show-graph"}, want: "--show-graph only applies with --dry-run"},
		{name: "unknown output", args: []string{"demo", "--dry-run", "-o", "table"}, want: `unsupported output format "table": use one of yaml, json`},
		{name: "timeout zero", args: []string{"demo", "--timeout", "0s"}, want: "--timeout must be positive (got 0s); to return without waiting use --wait=false"},
		{name: "file and flags", args: []string{"-f", "-", "--workers", "2", "--cni", "none"}, stdin: manifest(""), want: "-f takes the whole cluster from the manifest; remove --cni, --workers or edit the manifest instead"},
		{name: "file and mode", args: []string{"-f", "-", "--control-plane-mode", "hosted", "--etcd-members", "3"}, stdin: manifest(""), want: "-f takes the whole cluster from the manifest; remove --control-plane-mode, --etcd-members or edit the manifest instead"},
		{name: "missing file", args: []string{"-f", "/nonexistent/demo.yaml"}, want: "failed to read /nonexistent/demo.yaml"},
		{name: "file of another kind", args: []string{"-f", "-"}, stdin: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n", want: "failed to read a NestedCluster from stdin: it is a apps/v1 Deployment, not a knest.dev/v1alpha1 NestedCluster"},
		{name: "file with unknown field", args: []string{"-f", "-"}, stdin: manifest("spec:\n  controlPlane:\n    replica: 3\n"), want: `unknown field "spec.controlPlane.replica"`},
		{name: "file with two clusters", args: []string{"-f", "-"}, stdin: manifest("") + "---\n" + manifest(""), want: "it has 2 documents; create one cluster at a time"},
		{name: "empty file", args: []string{"-f", "-"}, stdin: "# nothing\n", want: "failed to read a NestedCluster from stdin: it is empty"},
		{name: "file name differs", args: []string{"other", "-f", "-"}, stdin: manifest(""), want: "the name other differs from the manifest's metadata.name demo"},
		{name: "file without name", args: []string{"-f", "-"}, stdin: "apiVersion: knest.dev/v1alpha1\nkind: NestedCluster\n", want: "has no metadata.name; set it or pass the name as an argument"},
		{name: "file namespace differs", args: []string{"-f", "-", "-n", "b"}, stdin: manifest("  namespace: a\n"), want: `the manifest's namespace "a" differs from --namespace "b"`},
		{name: "file invalid", args: []string{"-f", "-"}, stdin: manifest("spec:\n  controlPlane:\n    replicas: 4\n  network:\n    podCIDR: 10.0.0.0/28\n"), want: "invalid cluster demo:\n  - spec.controlPlane.replicas: Invalid value: 4: must be 1, 3, 5 or 7"},
		{name: "file with explicit zeros", args: []string{"-f", "-"}, stdin: manifest("spec:\n  controlPlane:\n    replicas: 0\n    cpu: 0\n  workers:\n  - name: workers\n    cpu: 0\n  version: \"\"\n"),
			want: "spec.controlPlane.cpu: 0 is not accepted (kubectl apply of this file is refused too); remove the field to get the default (2) or set another value; " +
				"spec.controlPlane.replicas: 0 is not accepted (kubectl apply of this file is refused too); remove the field to get the default (1) or set another value; " +
				"spec.version: \"\" is not accepted (kubectl apply of this file is refused too); remove the field to get the default (" + knestv1.DefaultVersion + ") or set another value; " +
				"spec.workers[0].cpu: 0 is not accepted"},
		{name: "file with memory in GB", args: []string{"-f", "-"}, stdin: manifest("spec:\n  workers:\n  - name: workers\n    memory: 4GB\n"),
			want: `failed to read a NestedCluster from stdin: spec.workers[0].memory: Invalid value: "4GB": ` + validation.MemoryQuantityMessage},
		{name: "bad namespace", args: []string{"demo", "-n", "Team_A"}, want: `--namespace "Team_A": a namespace name is a DNS label`},
		{name: "unknown flag", args: []string{"demo", "--worker", "3"}, want: "unknown flag: --worker\nRun 'knest create --help' for usage"},
		{name: "autoscale without bounds", args: []string{"demo", "--autoscale", "gpu=4"}, want: `--autoscale: autoscale "gpu=4": the bounds must be MIN:MAX, e.g. 0:4, or off`},
		{name: "autoscale min above max", args: []string{"demo", "--autoscale", "3:2"}, want: "the minimum (3) must be at most the maximum (2)"},
		{name: "autoscale off", args: []string{"demo", "--autoscale", "gpu=off"}, want: "--autoscale gpu=off: a new pool is autoscaled only when --autoscale gives its bounds, e.g. gpu=0:4; leave it out"},
		{name: "autoscale and workers", args: []string{"demo", "--workers", "2", "--autoscale", "1:3"}, want: "--workers sizes the pool workers and --autoscale 1:3 lets the autoscaler size it; use one of them"},
		{name: "autoscale and pool", args: []string{"demo", "--pool", "gpu=1", "--autoscale", "gpu=0:3"}, want: "--pool gpu=... sizes the pool gpu and --autoscale gpu=0:3 lets the autoscaler size it; use one of them"},
		{name: "storage classes with storage off", args: []string{"demo", "--no-storage", "--storage-class", "fast"}, want: "storage.classes need the storage provider"},
		{name: "storage class name with capitals", args: []string{"demo", "--storage-class", "Fast=ssd"}, want: "a StorageClass name is lower-case letters"},
		{name: "autoscale twice", args: []string{"demo", "--autoscale", "1:3", "--autoscale", "workers=1:4"}, want: "pool workers's autoscaling is given twice"},
		{name: "autoscale above the most", args: []string{"demo", "--autoscale", "gpu=0:500"}, want: "the maximum must be from 1 to 200"},
	}
	g := NewWithT(t)
	g.Expect(len(tests)).To(BeNumerically(">=", 15))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			stdout, stderr, err := run(t, tt.stdin, append([]string{"create"}, tt.args...)...)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(stdout).To(BeEmpty())
			g.Expect(stderr).To(HavePrefix("ERROR: "), "the error is printed once, at the top")
			g.Expect(strings.Count(stderr, "ERROR:")).To(Equal(1))
			g.Expect(stderr).NotTo(ContainSubstring("no kubeconfig"), "input must be checked before the host cluster is contacted")
		})
	}
}

func TestCreateValidInputReachesTheHostCluster(t *testing.T) {
	g := NewWithT(t)
	_, stderr, err := run(t, "", "create", "demo", "--workers", "3")
	g.Expect(err).To(MatchError(ContainSubstring("no kubeconfig for the host cluster: set --kubeconfig or KUBECONFIG")))
	g.Expect(stderr).To(Equal("ERROR: no kubeconfig for the host cluster: set --kubeconfig or KUBECONFIG, or create ~/.kube/config\n"))
}

func TestCreateFromFlags(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "ml", "-n", "team-a", "--dry-run", "-o", "json",
		"--version", "1.33.2", "--control-plane", "3", "--control-plane-cpu", "4", "--control-plane-memory", "8Gi",
		"--workers", "2", "--worker-cpu", "8", "--worker-memory", "16Gi", "--pool", "gpu=0", "--pool", "big=1",
		"--image", "registry.local/knest/node:v1.33.2", "--root-disk", "DataVolume", "--disk-size", "40Gi",
		"--pod-cidr", "10.200.0.0/16", "--service-cidr", "10.201.0.0/16", "--dns-domain", "ml.internal",
		"--cni", "none", "--service-type", "loadbalancer", "--api-host", "ml.example.com",
		"--cert-san", "10.1.2.3", "--cert-san", "ml.local", "--etcd-storage-class", "fast", "--etcd-size", "8Gi")
	g.Expect(err).NotTo(HaveOccurred())

	nc := &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Name).To(Equal("ml"))
	g.Expect(nc.Namespace).To(Equal("team-a"))
	s := nc.Spec
	g.Expect(s.Version).To(Equal("v1.33.2"))
	g.Expect(s.ControlPlane.Replicas).To(Equal(int32(3)))
	g.Expect(s.ControlPlane.CPU).To(Equal(int32(4)))
	g.Expect(s.ControlPlane.Memory.String()).To(Equal("8Gi"))
	g.Expect(s.ControlPlane.Image).To(Equal("registry.local/knest/node:v1.33.2"))
	g.Expect(s.ControlPlane.RootDisk.Type).To(Equal(knestv1.RootDiskDataVolume))
	g.Expect(s.ControlPlane.Etcd.StorageClassName).To(Equal("fast"))
	g.Expect(s.ControlPlane.Etcd.Size.String()).To(Equal("8Gi"))
	g.Expect(s.Workers).To(HaveLen(3))
	for i, want := range []struct {
		name     string
		replicas int32
	}{{"workers", 2}, {"gpu", 0}, {"big", 1}} {
		p := s.Workers[i]
		g.Expect(p.Name).To(Equal(want.name))
		g.Expect(*p.Replicas).To(Equal(want.replicas))
		g.Expect(p.CPU).To(Equal(int32(8)))
		g.Expect(p.Memory.Cmp(resource.MustParse("16Gi"))).To(Equal(0))
		g.Expect(p.RootDisk.Size.String()).To(Equal("40Gi"))
		g.Expect(p.Image).To(Equal("registry.local/knest/node:v1.33.2"))
	}
	g.Expect(s.Network).To(Equal(knestv1.NetworkSpec{PodCIDR: "10.200.0.0/16", ServiceCIDR: "10.201.0.0/16", DNSDomain: "ml.internal", CNI: knestv1.CNINone}))
	g.Expect(s.APIServer).To(Equal(knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, Host: "ml.example.com", CertSANs: []string{"10.1.2.3", "ml.local"}}))
}

func TestCreateOnlyPools(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "demo", "--dry-run", "-o", "json", "--pool", "gpu=2")
	g.Expect(err).NotTo(HaveOccurred())
	nc := &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Spec.Workers).To(HaveLen(1), "--pool without --workers creates only the named pools")
	g.Expect(nc.Spec.Workers[0].Name).To(Equal("gpu"))
}

func TestCreateAutoscaledPools(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "ml", "--dry-run", "-o", "json", "--autoscale", "1:5", "--pool", "cpu=2", "--autoscale", "gpu=0:4")
	g.Expect(err).NotTo(HaveOccurred())
	nc := &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Spec.Workers).To(HaveLen(3))
	g.Expect(nc.Spec.Workers[0]).To(And(HaveField("Name", "workers"), HaveField("Replicas", BeNil()),
		HaveField("Autoscaling", Equal(&knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 5}))))
	g.Expect(nc.Spec.Workers[1]).To(And(HaveField("Name", "cpu"), HaveField("Replicas", HaveValue(BeEquivalentTo(2))), HaveField("Autoscaling", BeNil())))
	g.Expect(nc.Spec.Workers[2]).To(And(HaveField("Name", "gpu"), HaveField("Replicas", BeNil()),
		HaveField("Autoscaling", Equal(&knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 4}))))

	// Only another pool autoscaled: as with --pool, no default pool.
	stdout, _, err = run(t, "", "create", "ml", "--dry-run", "-o", "json", "--autoscale", "gpu=0:4")
	g.Expect(err).NotTo(HaveOccurred())
	nc = &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Spec.Workers).To(HaveLen(1))
	g.Expect(nc.Spec.Workers[0].Name).To(Equal("gpu"))
}

// decodeAll decodes multi-document YAML or a JSON List strictly into typed objects.
func decodeAll(g Gomega, out string, format string) []runtime.Object {
	codecs := serializer.NewCodecFactory(knest.Scheme(), serializer.EnableStrict)
	decode := func(raw []byte) runtime.Object {
		obj, _, err := codecs.UniversalDeserializer().Decode(raw, nil, nil)
		g.Expect(err).NotTo(HaveOccurred(), "document:\n%s", raw)
		return obj
	}
	var objs []runtime.Object
	if format == "json" {
		list := &metav1.List{}
		g.Expect(json.Unmarshal([]byte(out), list)).To(Succeed())
		for _, item := range list.Items {
			objs = append(objs, decode(item.Raw))
		}
		return objs
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		objs = append(objs, decode([]byte(doc)))
	}
	return objs
}

func kinds(objs []runtime.Object) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	return out
}

func TestDryRunShowGraph(t *testing.T) {
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			g := NewWithT(t)
			stdout, stderr, err := run(t, "", "create", "demo", "--dry-run", "-o", format, "--show-graph", "--pool", "gpu=0", "--workers", "2")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stderr).To(BeEmpty())
			objs := decodeAll(g, stdout, format)
			g.Expect(kinds(objs)).To(Equal(map[string]int{
				"NestedCluster":           1,
				"Cluster":                 1,
				"KubevirtCluster":         1,
				"KubevirtMachineTemplate": 3, // control plane, workers, gpu
				"KubeadmControlPlane":     1,
				"MachineHealthCheck":      3,
				"KubeadmConfigTemplate":   2,
				"MachineDeployment":       2,
				"ConfigMap":               2,
				"ClusterResourceSet":      2,
				"NetworkPolicy":           1,
				// The cloud controller manager and the CSI driver's controller (and its
				// ConfigMap and ClusterResourceSet above).
				"ServiceAccount": 2, "Role": 2, "RoleBinding": 2, "Deployment": 2,
			}))

			// The NestedCluster is what the API server would store: defaulted.
			nc := objs[0].(*knestv1.NestedCluster)
			want := nc.DeepCopy()
			cluster.Default(want)
			g.Expect(nc).To(Equal(want))
			g.Expect(nc.Namespace).To(Equal("default"))
			for _, o := range objs {
				g.Expect(o.(metav1.Object).GetNamespace()).To(Equal("default"))
			}
		})
	}
}

// A hosted control plane's graph has its HostedControlPlane in place of the control
// plane's VMs.
func TestDryRunShowGraphHosted(t *testing.T) {
	g := NewWithT(t)
	stdout, stderr, err := run(t, "", "create", "demo", "--control-plane-mode", "hosted", "--dry-run", "-o", "yaml", "--show-graph")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stderr).To(BeEmpty())
	g.Expect(kinds(decodeAll(g, stdout, "yaml"))).To(Equal(map[string]int{
		"NestedCluster":           1,
		"Cluster":                 1,
		"KubevirtCluster":         1,
		"HostedControlPlane":      1,
		"KubevirtMachineTemplate": 1, // the workers only
		"MachineHealthCheck":      1,
		"KubeadmConfigTemplate":   1,
		"MachineDeployment":       1,
		"ConfigMap":               2,
		"ClusterResourceSet":      2,
		"NetworkPolicy":           1,
		"ServiceAccount":          2,
		"Role":                    2,
		"RoleBinding":             2,
		"Deployment":              2,
	}))
}

// --image and --root-disk shape every VM: a hosted cluster's workers alone.
func TestHostedNodeFlagsShapeTheWorkers(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "demo", "--control-plane-mode", "hosted", "--dry-run",
		"--image", "registry.local/knest/node:v1.35.4", "--root-disk", "datavolume", "--disk-size", "20Gi")
	g.Expect(err).NotTo(HaveOccurred())
	nc := decodeAll(g, stdout, "yaml")[0].(*knestv1.NestedCluster)
	g.Expect(nc.Spec.ControlPlane.Image).To(BeEmpty())
	g.Expect(nc.Spec.ControlPlane.RootDisk.Size).To(BeNil())
	g.Expect(nc.Spec.Workers[0].Image).To(Equal("registry.local/knest/node:v1.35.4"))
	g.Expect(nc.Spec.Workers[0].RootDisk.Size.String()).To(Equal("20Gi"))
}

func TestDryRunWithoutGraphOrCNI(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "demo", "--dry-run")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds(decodeAll(g, stdout, "yaml"))).To(Equal(map[string]int{"NestedCluster": 1}), "default output is YAML of the NestedCluster alone")
	g.Expect(stdout).NotTo(ContainSubstring("status"))
	g.Expect(stdout).NotTo(ContainSubstring("creationTimestamp"))

	stdout, _, err = run(t, "", "create", "demo", "--dry-run", "-o", "yaml", "--show-graph", "--cni", "none", "--no-storage")
	g.Expect(err).NotTo(HaveOccurred())
	k := kinds(decodeAll(g, stdout, "yaml"))
	g.Expect(k).NotTo(HaveKey("ClusterResourceSet"))
	g.Expect(k).NotTo(HaveKey("ConfigMap"))
}

func TestDryRunRoundTripsThroughFile(t *testing.T) {
	g := NewWithT(t)
	first, _, err := run(t, "", "create", "demo", "--dry-run", "--workers", "3", "--pool", "gpu=1", "--cert-san", "x.example")
	g.Expect(err).NotTo(HaveOccurred())
	second, _, err := run(t, first, "create", "-f", "-", "--dry-run")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(Equal(first))

	path := filepath.Join(t.TempDir(), "demo.yaml")
	g.Expect(os.WriteFile(path, []byte(first), 0o600)).To(Succeed())
	third, _, err := run(t, "", "create", "demo", "-f", path, "--dry-run", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third).To(Equal(first))
}

// The load-balancer provider is on unless --no-load-balancer turns it off, and the
// graph then has no cloud controller manager.
func TestCreateLoadBalancerProvider(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		args     []string
		disabled bool
	}{{nil, false}, {[]string{"--no-load-balancer"}, true}} {
		stdout, _, err := run(t, "", append([]string{"create", "web", "--dry-run", "-o", "json"}, tc.args...)...)
		g.Expect(err).NotTo(HaveOccurred())
		nc := &knestv1.NestedCluster{}
		g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
		g.Expect(nc.Spec.Providers.LoadBalancer.Disabled).To(Equal(tc.disabled), "%v", tc.args)

		stdout, _, err = run(t, "", append([]string{"create", "web", "--dry-run", "--show-graph"}, tc.args...)...)
		g.Expect(err).NotTo(HaveOccurred())
		if tc.disabled {
			g.Expect(stdout).NotTo(ContainSubstring("web-cloud-controller-manager"))
		} else {
			g.Expect(stdout).To(ContainSubstring("name: web-cloud-controller-manager"))
		}
	}
}

// --storage-class names the tenant's classes, the first the default; --no-storage
// turns the CSI driver off.
func TestCreateStorageProvider(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := run(t, "", "create", "db", "--dry-run", "-o", "json", "--storage-class", "fast=ssd", "--storage-class", "slow")
	g.Expect(err).NotTo(HaveOccurred())
	nc := &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Spec.Providers.Storage).To(Equal(knestv1.StorageProviderSpec{Classes: []knestv1.TenantStorageClass{
		{Name: "fast", HostStorageClassName: "ssd", Default: true}, {Name: "slow"},
	}}))

	stdout, _, err = run(t, "", "create", "db", "--dry-run", "-o", "json", "--no-storage")
	g.Expect(err).NotTo(HaveOccurred())
	nc = &knestv1.NestedCluster{}
	g.Expect(json.Unmarshal([]byte(stdout), nc)).To(Succeed())
	g.Expect(nc.Spec.Providers.Storage.Disabled).To(BeTrue())
}
