package nestedcluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	capisecret "sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/controller/nestedcluster"
	"github.com/knest-dev/knest/internal/freeport"
	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/autoscaler"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
)

// TestRunsWithOnlyItsOwnRBAC runs the controller as the service account of
// config/rbac, with leader election as config/manager runs it: what the generated
// roles grant must be enough to build a cluster, and no more than knest needs for
// leases.
func TestRunsWithOnlyItsOwnRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "knest-system"
	cfg, as := asController(t, g)

	// Node heartbeats and other components' leader leases are out of reach.
	for _, other := range []string{"kube-system", "kube-node-lease", "default"} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "knest-probe"}}
		g.Expect(as.Create(ctx, lease)).To(Satisfy(apierrors.IsForbidden), "create a Lease in %s", other)
	}

	metricsAddr, healthAddr := freeport.Address(t), freeport.Address(t)
	stop := startControllerWith(t, cfg, manager.Options{Concurrency: 2, ToolImage: testToolImage, LeaderElection: true, LeaderElectionNamespace: ns,
		MetricsAddr: metricsAddr, HealthAddr: healthAddr})
	g.Eventually(func() (int, error) { return httpGet("http://"+healthAddr+"/readyz", "") }, timeout, interval).Should(Equal(http.StatusOK))
	nc := testenv.NestedCluster(namespace(t), "rbac")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	waitForGraph(g, nc)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseProvisioning))
	}, timeout, interval).Should(Succeed())

	// Metrics: only to callers the API server authenticates and authorizes.
	metrics := "https://" + metricsAddr + "/metrics"
	g.Eventually(func() (int, error) { return httpGet(metrics, "") }, timeout, interval).Should(Equal(http.StatusUnauthorized))
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Expect(env.Client.Create(ctx, sa)).To(Succeed())
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
		g.Expect(env.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		return tr.Status.Token
	}
	g.Expect(httpGet(metrics, token("stranger"))).To(Equal(http.StatusForbidden))
	// Another account, bound before its first request (the endpoint caches denials).
	scraper := token("scraper")
	g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-reads-knest-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "knest-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	})).To(Succeed())
	var body string
	g.Eventually(func(g Gomega) {
		code, b, err := httpGetBody(metrics, scraper)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK))
		body = b
	}, timeout, interval).Should(Succeed())
	g.Expect(body).To(MatchRegexp(`(?m)^knest_nestedclusters\{phase="Provisioning"\} [1-9]`))
	g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))

	// Stopping hands the lease over at once.
	stop()
	lease := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "knest-controller.knest.dev"}, lease)).To(Succeed())
	g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(BeEmpty())
}

const controllerUser = "system:serviceaccount:knest-system:knest-controller"

// asController installs config/rbac and the controller's admission fence, and
// returns a config and client that authenticate as the controller's service account.
func asController(t *testing.T, g Gomega) (*rest.Config, client.Client) {
	t.Helper()
	ctx := context.Background()
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "knest-system"}}))).To(Succeed())
	files := []string{"rbac/role.yaml", "rbac/tenant_role.yaml", "rbac/service_account.yaml", "rbac/metrics_reader_role.yaml", "admission/controller_fence_policy.yaml"}
	for _, file := range files {
		for _, obj := range readManifests(g, filepath.Join("..", "..", "..", "config", file)) {
			g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, obj))).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteUserKubeconfig(kubeconfig, controllerUser, "system:serviceaccounts", "system:serviceaccounts:knest-system")).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return cfg, as
}

// TestFencedToTenantNamespaces: the controller reads no Secret and writes nothing
// outside namespaces labelled knest.dev/tenants=true, cannot bind itself anything
// but knest-tenant there, and a cluster in another namespace waits, saying why,
// until the namespace is enabled. A hosted cluster's Secrets and workloads are
// written through the binding it makes.
func TestFencedToTenantNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, as := asController(t, g)
	tenants := namespace(t)
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plain-"}}
	g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, StringData: map[string]string{"k": "v"}}
	for _, ns := range []string{"kube-system", plain.Name, tenants} {
		s := secret.DeepCopy()
		s.Namespace = ns
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}

	stop := startControllerWith(t, cfg, manager.Options{Concurrency: 2, ToolImage: testToolImage})
	defer stop()

	// A cluster in a namespace that is not enabled waits, and says why.
	waiting := testenv.NestedCluster(plain.Name, "waiting")
	g.Expect(env.Client.Create(ctx, waiting)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, waiting)
		g.Expect(conditions.GetReason(waiting, knestv1.TopologyReconciledCondition)).To(Equal(knestv1.NamespaceNotEnabledReason))
		g.Expect(conditions.GetMessage(waiting, knestv1.TopologyReconciledCondition)).To(Equal(knestv1.NamespaceNotEnabledMessage(plain.Name)))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(waiting), &clusterv1.Cluster{})).To(Satisfy(apierrors.IsNotFound))

	// A hosted cluster in a tenant namespace: the controller binds knest-tenant to
	// itself there, and its control plane's Secrets and workloads follow.
	hostedNC := testenv.NestedCluster(tenants, "hosted")
	hostedNC.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
	hostedNC.Spec.ControlPlane.Etcd.Ephemeral = true
	// Its autoscaler's Role holds rights the controller has only through that
	// binding: RBAC's escalation check and the fence let it grant them there.
	hostedNC.Spec.Workers[0].Autoscaling = &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 2}
	g.Expect(env.Client.Create(ctx, hostedNC)).To(Succeed())
	// Cluster API's Cluster controller (not run here) owns the control plane.
	g.Eventually(func(g Gomega) {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: hostedNC.Name}}
		env.Get(g, c)
		hcp := &hcpv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: cluster.ControlPlaneName(hostedNC.Name)}}
		env.Get(g, hcp)
		hcp.OwnerReferences = append(hcp.OwnerReferences, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID})
		g.Expect(env.Client.Update(ctx, hcp)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: nestedcluster.AccessBindingName}}
	g.Eventually(func(g Gomega) {
		env.Get(g, binding)
		g.Expect(binding.RoleRef.Name).To(Equal(nestedcluster.TenantRole))
		g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "knest-system", Name: "knest-controller"}))
		env.Get(g, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: hosted.EtcdName(hostedNC.Name)}})
		env.Get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: capisecret.Name(hostedNC.Name, capisecret.ClusterCA)}})
		env.Get(g, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: autoscaler.Name(hostedNC.Name)}})
		env.Get(g, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: tenants, Name: autoscaler.Name(hostedNC.Name)}})
	}, timeout, interval).Should(Succeed())

	// Secrets: in the tenant namespace only.
	g.Expect(as.Get(ctx, client.ObjectKey{Namespace: tenants, Name: "kept"}, &corev1.Secret{})).To(Succeed())
	for _, ns := range []string{"kube-system", plain.Name} {
		g.Expect(as.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &corev1.Secret{})).To(Satisfy(apierrors.IsForbidden), "read a Secret in %s", ns)
		g.Expect(as.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden), "list Secrets in %s", ns)
	}
	g.Expect(as.List(ctx, &corev1.SecretList{})).To(Satisfy(apierrors.IsForbidden), "list every Secret")

	// Writes outside tenant namespaces: refused by RBAC for workloads, by the
	// admission fence for the kinds its cluster-wide role writes.
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "probe"}}
	g.Expect(as.Create(ctx, deploy)).To(Satisfy(apierrors.IsForbidden))
	foreign := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: plain.Name, Name: "probe"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	g.Expect(as.Create(ctx, foreign)).To(MatchError(ContainSubstring("the knest controller writes only in namespaces labelled knest.dev/tenants=true; namespace " + plain.Name + " is not")))

	// Bindings: knest-tenant to itself, in tenant namespaces only.
	bind := func(ns, role string, subject rbacv1.Subject) error {
		return as.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		})
	}
	self := binding.Subjects[0]
	g.Expect(bind(plain.Name, nestedcluster.TenantRole, self)).To(MatchError(ContainSubstring("namespace " + plain.Name + " is not")))
	g.Expect(bind("kube-system", nestedcluster.TenantRole, self)).To(Satisfy(apierrors.IsForbidden))
	other := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: tenants, Name: "default"}
	g.Expect(bind(tenants, nestedcluster.TenantRole, other)).To(MatchError(ContainSubstring("may only bind ClusterRole knest-tenant, to itself")))
	g.Expect(bind(tenants, "cluster-admin", self)).To(Satisfy(apierrors.IsForbidden))
	// A Role of the namespace: to its own service accounts only.
	toRole := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenants, GenerateName: "probe-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: autoscaler.Name(hostedNC.Name)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: plain.Name, Name: "default"}},
	}
	g.Expect(as.Create(ctx, toRole)).To(MatchError(ContainSubstring("to service accounts of that namespace")))
	// Nor can it enable a namespace itself.
	g.Expect(as.Patch(ctx, plain, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"knest.dev/tenants":"true"}}}`)))).To(Satisfy(apierrors.IsForbidden))

	// Once a host admin enables the namespace, the waiting cluster goes on.
	g.Expect(env.Client.Patch(ctx, plain, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"knest.dev/tenants":"true"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, waiting)
		g.Expect(conditions.GetReason(waiting, knestv1.TopologyReconciledCondition)).NotTo(Equal(knestv1.NamespaceNotEnabledReason))
		env.Get(g, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: plain.Name, Name: waiting.Name}})
	}, timeout, interval).Should(Succeed())
}

// readManifests decodes every object of a multi-document YAML file.
func readManifests(g Gomega, path string) []*unstructured.Unstructured {
	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		g.Expect(err).NotTo(HaveOccurred(), path)
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func httpGet(url, token string) (int, error) {
	code, _, err := httpGetBody(url, token)
	return code, err
}

// httpGetBody GETs url with a bearer token (none if empty), trusting any
// certificate: the metrics endpoint's is self-signed.
func httpGetBody(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test's self-signed endpoint
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
