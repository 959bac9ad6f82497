package tenant

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// Reader reads the identity of a tenant cluster through its API: the UID of
// its kube-system namespace, which a control plane that lost its etcd (a VM
// restarted from its container disk, a hosted etcd whose volume was lost) makes
// anew. Cluster API cannot tell: its machines and pods are all up.
type Reader interface {
	TenantID(ctx context.Context, nc *knestv1.NestedCluster) (string, error)
}

// KubeconfigReader reads it with Cluster API's admin kubeconfig Secret of
// the cluster (the one `knest kubeconfig` hands out). A cluster reconciles on every
// change of its Cluster API objects, many a minute while machines come and go, and
// a control plane that is down answers only after the timeout: so what the tenant
// said is kept for Every, per cluster and kubeconfig (a new Secret is read anew).
type KubeconfigReader struct {
	// Reader reads the Secret; uncached, so the controller watches no Secrets.
	Reader client.Reader
	// Timeout bounds one read; a tenant API that does not answer is not a lost one.
	Timeout time.Duration
	// Every is how long an answer (or its absence) is kept.
	Every time.Duration

	mu   sync.Mutex
	seen map[types.UID]answer
}

type answer struct {
	kubeconfig string // the Secret's resourceVersion
	at         time.Time
	id         string
	err        error
}

// TenantID implements Reader.
func (r *KubeconfigReader) TenantID(ctx context.Context, nc *knestv1.NestedCluster) (string, error) {
	s, err := kubeconfigSecret(ctx, r.Reader, client.ObjectKeyFromObject(nc))
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	a, ok := r.seen[nc.UID]
	r.mu.Unlock()
	if ok && a.kubeconfig == s.ResourceVersion && time.Since(a.at) < r.Every {
		return a.id, a.err
	}
	id, err := r.read(ctx, s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[types.UID]answer{}
	}
	for uid, old := range r.seen {
		if time.Since(old.at) > 10*r.Every { // clusters gone
			delete(r.seen, uid)
		}
	}
	r.seen[nc.UID] = answer{kubeconfig: s.ResourceVersion, at: time.Now(), id: id, err: err}
	return id, err
}

func (r *KubeconfigReader) read(ctx context.Context, s *corev1.Secret) (string, error) {
	cs, err := clientsetFrom(s, r.Timeout)
	if err != nil {
		return "", err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the tenant API did not answer: %w", err)
	}
	return string(ns.UID), nil
}
