//go:build e2e

package tenant_test

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The sample API server's group, as Kubernetes' test/images/sample-apiserver serves it.
const (
	wardleGroup   = "wardle.example.com"
	wardleVersion = "v1alpha1"
)

// expectAggregatedAPI runs Kubernetes' sample API server (its conformance image, with
// etcd beside it, as the suite's Aggregator spec does) behind a Service in the tenant,
// registers it as an APIService, and expects a Flunder created, read and listed through
// the tenant's API server. That is the aggregated API path of a hosted control plane:
// the API server reaches the Service's pod through konnectivity with its front-proxy
// client certificate, and the pod calls back to the API server to authenticate and
// authorize the request. The conformance spec itself is not in the CI smoke: its
// pod's 1 s readiness probe misses on the emulated worker and the API server then
// answers 503 (docs/conformance.md); here the probe allows 5 s.
func expectAggregatedAPI(t *testing.T, tc tenant, conformanceDir string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	start := time.Now()
	images := suiteImages(t, conformanceDir)
	sampleImage, etcdImage := images["sample-apiserver"], images["etcd"]
	g.Expect(sampleImage).NotTo(BeEmpty(), "e2e.test --list-images names no sample-apiserver image")
	g.Expect(etcdImage).NotTo(BeEmpty(), "e2e.test --list-images names no etcd image")

	const name, ns = "sample-api", "default"
	server, certPEM := tlsServer(t, name, ns, name, 443, corev1.Container{
		Name: "sample-apiserver", Image: sampleImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"--etcd-servers=http://127.0.0.1:2379",
			"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key",
			"--audit-log-path=-", "--audit-log-maxage=0", "--audit-log-maxbackup=0"},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(443), Scheme: corev1.URISchemeHTTPS}},
			PeriodSeconds: 5, TimeoutSeconds: 5,
		},
	}, corev1.Container{
		Name: "etcd", Image: etcdImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/usr/local/bin/etcd",
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379"},
	})
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	readOnly := []string{"get", "list", "watch"}
	objs := append([]client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		// The server reads the front proxy's CA from kube-system, delegates
		// authentication and authorization to the API server, and its admission
		// plugins watch namespaces, webhooks and priority levels.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-auth-reader", Namespace: "kube-system"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects: sa},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-auth-delegator"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects: sa},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-reader"}, Rules: []rbacv1.PolicyRule{
			{Verbs: readOnly, APIGroups: []string{""}, Resources: []string{"namespaces"}},
			{Verbs: readOnly, APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"*"}},
			{Verbs: readOnly, APIGroups: []string{"flowcontrol.apiserver.k8s.io"}, Resources: []string{"prioritylevelconfigurations", "flowschemas"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name + "-reader"},
			Subjects: sa},
	}, server...)
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": wardleVersion + "." + wardleGroup},
		"spec": map[string]any{
			"group": wardleGroup, "version": wardleVersion,
			"service":              map[string]any{"namespace": ns, "name": name, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(certPEM),
			"groupPriorityMinimum": int64(2000), "versionPriority": int64(200),
		},
	}}
	// The APIService goes first: one left unavailable fails discovery, and with it
	// namespace deletion, for the steps after this one.
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		for _, o := range append([]client.Object{apiService}, objs...) {
			if err := tc.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting %T %s: %v", o, o.GetName(), err)
			}
		}
	})
	createAvailable(t, tc, objs, ns, name)
	s.timeline.add("aggregated API", "the sample API server's pod ready", time.Since(start))
	g.Expect(client.IgnoreAlreadyExists(tc.Create(ctx, apiService))).To(Succeed())

	flunder := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: wardleGroup, Version: wardleVersion, Kind: "Flunder"})
		u.SetNamespace(ns)
		u.SetName("knest-e2e")
		return u
	}
	// The API server answers 503 until its availability check has reached the pod.
	g.Eventually(func(g Gomega) {
		g.Expect(client.IgnoreAlreadyExists(tc.Create(ctx, flunder()))).To(Succeed(), "creating a Flunder through the API server")
	}, tenantTimeout, poll).Should(Succeed())
	s.timeline.add("aggregated API", "a Flunder created through the API server", time.Since(start))
	got := flunder()
	g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed(), "reading the Flunder back")
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: wardleGroup, Version: wardleVersion, Kind: "FlunderList"})
	g.Expect(tc.List(ctx, list, client.InNamespace(ns))).To(Succeed(), "listing Flunders")
	g.Expect(list.Items).To(ContainElement(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", "knest-e2e")))))
	g.Expect(tc.Delete(ctx, got)).To(Succeed(), "deleting the Flunder")
}

// suiteImages is the conformance build's images by name (the last element of the
// repository), as its e2e.test lists them under knest's names.
func suiteImages(t *testing.T, dir string) map[string]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "bin", "e2e.test"), "--list-images")
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList(t, dir))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("e2e.test --list-images: %v", err)
	}
	images := map[string]string{}
	for _, ref := range strings.Fields(string(out)) {
		repo, _, _ := strings.Cut(ref[strings.LastIndexByte(ref, '/')+1:], ":")
		images[repo] = ref
	}
	return images
}

// repoList is the conformance build's KUBE_TEST_REPO_LIST: the suite's images under
// the names the node image has them by.
func repoList(t *testing.T, dir string) string {
	t.Helper()
	lists, _ := filepath.Glob(filepath.Join(dir, "images", "*", "repo-list.yaml"))
	if len(lists) != 1 {
		t.Fatalf("%s: want one images/*/repo-list.yaml, found %d: make conformance-images", dir, len(lists))
	}
	return lists[0]
}
