package tenant_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/tenant"
)

// fakeTenant is a tenant API server that answers only for its kube-system namespace,
// and counts how often it was asked.
type fakeTenant struct {
	mu     sync.Mutex
	uid    string
	status int // an HTTP status to answer with instead, when not 0
	hang   bool
	asked  int
	server *httptest.Server
}

func newFakeTenant(t *testing.T, uid string) *fakeTenant {
	f := &fakeTenant{uid: uid}
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.asked++
		uid, status, hang := f.uid, f.status, f.hang
		f.mu.Unlock()
		switch {
		case hang:
			<-r.Context().Done()
			return
		case r.URL.Path != "/api/v1/namespaces/kube-system":
			http.NotFound(w, r)
			return
		case status != 0:
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q}}`, uid)
	}))
	t.Cleanup(f.server.Close)
	return f
}

func (f *fakeTenant) set(mutate func(f *fakeTenant)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mutate(f)
}

func (f *fakeTenant) times() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

// kubeconfig is a kubeconfig of the fake tenant for user (the fake checks none).
func (f *fakeTenant) kubeconfig(t *testing.T, user string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tenant"] = &clientcmdapi.Cluster{Server: f.server.URL}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[user+"@tenant"] = &clientcmdapi.Context{Cluster: "tenant", AuthInfo: user}
	cfg.CurrentContext = user + "@tenant"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatalf("failed to write kubeconfig: %v", err)
	}
	return b
}

// cluster is a NestedCluster as the reader is given it; it need not be stored.
func cluster(ns, name string) *knestv1.NestedCluster {
	return &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

// putKubeconfig writes the cluster's admin kubeconfig Secret as Cluster API does.
func putKubeconfig(t *testing.T, nc *knestv1.NestedCluster, kubeconfig []byte) {
	t.Helper()
	g := NewWithT(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nc.Namespace, Name: secret.Name(nc.Name, secret.Kubeconfig)}}
	err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(s), s)
	s.Data = map[string][]byte{secret.KubeconfigDataName: kubeconfig}
	if apierrors.IsNotFound(err) {
		g.Expect(env.Client.Create(t.Context(), s)).To(Succeed())
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Update(t.Context(), s)).To(Succeed())
}

// The identity is the UID of the tenant's kube-system namespace, read through the
// admin kubeconfig; here the test bed plays the tenant.
func TestTenantIDIsTheUIDOfKubeSystem(t *testing.T) {
	g := NewWithT(t)
	nc := cluster(newNamespace(t, nil), "demo")
	putKubeconfig(t, nc, env.Kubeconfig())
	kubeSystem := &corev1.Namespace{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, kubeSystem)).To(Succeed())

	r := &tenant.KubeconfigReader{Reader: env.Client, Timeout: 10 * time.Second, Every: time.Minute}
	id, err := r.TenantID(t.Context(), nc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(string(kubeSystem.UID)))
	g.Expect(id).NotTo(BeEmpty())
}

// An answer, or its absence, is kept for Every per cluster, and a new kubeconfig
// Secret is read anew: reconciles come many a minute, a tenant API that is down
// answers only after the timeout.
func TestTenantIDIsKeptPerClusterAndKubeconfig(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, nil)
	api := newFakeTenant(t, "uid-1")
	demo, other := cluster(ns, "demo"), cluster(ns, "other")
	putKubeconfig(t, demo, api.kubeconfig(t, "admin"))
	putKubeconfig(t, other, api.kubeconfig(t, "admin"))
	r := &tenant.KubeconfigReader{Reader: env.Client, Timeout: 10 * time.Second, Every: time.Hour}

	g.Expect(r.TenantID(t.Context(), demo)).To(Equal("uid-1"))
	g.Expect(api.times()).To(Equal(1))

	// The tenant's control plane lost its etcd; within Every the old answer stands.
	api.set(func(f *fakeTenant) { f.uid = "uid-2" })
	g.Expect(r.TenantID(t.Context(), demo)).To(Equal("uid-1"))
	g.Expect(api.times()).To(Equal(1), "kept: the tenant was not asked again")
	// Another cluster has an answer of its own.
	g.Expect(r.TenantID(t.Context(), other)).To(Equal("uid-2"))
	g.Expect(api.times()).To(Equal(2))

	// A new kubeconfig is read anew. (Writing the same one again changes nothing:
	// the API server keeps the Secret's resourceVersion.)
	putKubeconfig(t, demo, api.kubeconfig(t, "admin"))
	g.Expect(r.TenantID(t.Context(), demo)).To(Equal("uid-1"))
	putKubeconfig(t, demo, api.kubeconfig(t, "rotated"))
	g.Expect(r.TenantID(t.Context(), demo)).To(Equal("uid-2"))
	g.Expect(api.times()).To(Equal(3))

	// An error is kept too.
	down := cluster(ns, "down")
	putKubeconfig(t, down, api.kubeconfig(t, "admin"))
	api.set(func(f *fakeTenant) { f.status = http.StatusServiceUnavailable })
	_, err := r.TenantID(t.Context(), down)
	g.Expect(err).To(MatchError(ContainSubstring("the tenant API did not answer")))
	asked := api.times()
	api.set(func(f *fakeTenant) { f.status = 0; f.uid = "uid-3" })
	_, err = r.TenantID(t.Context(), down)
	g.Expect(err).To(MatchError(ContainSubstring("the tenant API did not answer")))
	g.Expect(api.times()).To(Equal(asked))

	// Once Every has passed the tenant is asked again.
	short := &tenant.KubeconfigReader{Reader: env.Client, Timeout: 10 * time.Second, Every: 200 * time.Millisecond}
	api.set(func(f *fakeTenant) { f.status = http.StatusServiceUnavailable })
	_, err = short.TenantID(t.Context(), down)
	g.Expect(err).To(HaveOccurred())
	api.set(func(f *fakeTenant) { f.status = 0 })
	time.Sleep(300 * time.Millisecond)
	g.Expect(short.TenantID(t.Context(), down)).To(Equal("uid-3"))
}

func TestTenantIDErrors(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, nil)
	r := &tenant.KubeconfigReader{Reader: env.Client, Timeout: 500 * time.Millisecond, Every: time.Hour}

	// No kubeconfig Secret yet: Cluster API has not written it.
	_, err := r.TenantID(t.Context(), cluster(ns, "new"))
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the kubeconfig Secret")))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the API server's error is kept: %v", err)

	broken := cluster(ns, "broken")
	putKubeconfig(t, broken, []byte("not a kubeconfig"))
	_, err = r.TenantID(t.Context(), broken)
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the kubeconfig Secret")))

	// A tenant API that does not answer is given up on after Timeout.
	api := newFakeTenant(t, "uid-1")
	api.set(func(f *fakeTenant) { f.hang = true })
	silent := cluster(ns, "silent")
	putKubeconfig(t, silent, api.kubeconfig(t, "admin"))
	started := time.Now()
	_, err = r.TenantID(t.Context(), silent)
	g.Expect(err).To(MatchError(ContainSubstring("the tenant API did not answer")))
	g.Expect(time.Since(started)).To(BeNumerically("<", 5*time.Second))
}
