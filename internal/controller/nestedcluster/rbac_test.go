package nestedcluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/manager"
)

// TestRunsWithOnlyItsOwnRBAC runs the controller as the service account of
// config/rbac, with leader election as config/manager runs it: what the generated
// roles grant must be enough to build a cluster, and no more than knest needs for
// leases.
func TestRunsWithOnlyItsOwnRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, sa = "knest-system", "system:serviceaccount:knest-system:knest-controller"
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	for _, file := range []string{"role.yaml", "service_account.yaml", "metrics_reader_role.yaml"} {
		for _, obj := range readManifests(g, filepath.Join("..", "..", "..", "config", "rbac", file)) {
			g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, obj))).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteUserKubeconfig(kubeconfig, sa, "system:serviceaccounts", "system:serviceaccounts:"+ns)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// Node heartbeats and other components' leader leases are out of reach.
	for _, other := range []string{"kube-system", "kube-node-lease", "default"} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "knest-probe"}}
		g.Expect(as.Create(ctx, lease)).To(Satisfy(apierrors.IsForbidden), "create a Lease in %s", other)
	}

	metricsAddr, healthAddr := freeAddr(g), freeAddr(g)
	stop := startControllerWith(t, cfg, manager.Options{Concurrency: 2, ToolImage: testToolImage, LeaderElection: true, LeaderElectionNamespace: ns,
		MetricsAddr: metricsAddr, HealthAddr: healthAddr})
	g.Eventually(func() (int, error) { return httpGet("http://"+healthAddr+"/readyz", "") }, timeout, interval).Should(Equal(http.StatusOK))
	nc := newCluster(namespace(t, g), "rbac")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	waitForGraph(g, nc)
	g.Eventually(func(g Gomega) {
		get(g, nc)
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

func freeAddr(g Gomega) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
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
