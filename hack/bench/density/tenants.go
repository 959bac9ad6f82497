package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
	"github.com/knest-dev/knest/pkg/knest"
)

const tenantName = "t"

type bench struct {
	o       options
	kc      *knest.Client
	cs      kubernetes.Interface
	nodes   []string
	tenants []client.ObjectKey
}

// host describes the host the run measured.
type host struct {
	Nodes       int    `json:"nodes"`
	Allocatable usage  `json:"allocatable"`
	Kubelet     string `json:"kubelet"`
}

func (b *bench) hostInfo(ctx context.Context) (host, error) {
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return host{}, fmt.Errorf("host nodes: %v", err)
	}
	h := host{Nodes: len(nodes.Items), Kubelet: nodes.Items[0].Status.NodeInfo.KubeletVersion}
	for _, n := range nodes.Items {
		b.nodes = append(b.nodes, n.Name)
		h.Allocatable = h.Allocatable.add(resources(n.Status.Allocatable))
	}
	return h, nil
}

func (b *bench) key(i int) client.ObjectKey {
	return client.ObjectKey{Namespace: fmt.Sprintf("%s-%02d", b.o.prefix, i), Name: tenantName}
}

// nestedCluster is what `knest create t --control-plane-mode hosted --workers 0
// --etcd-members M` makes, its API reachable on a NodePort.
func (b *bench) nestedCluster(key client.ObjectKey) *knestv1.NestedCluster {
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	s := &nc.Spec
	s.Version = b.o.version
	s.ControlPlane.Mode = knestv1.ControlPlaneHosted
	s.ControlPlane.Replicas = 1
	s.ControlPlane.Etcd.Members = int32(b.o.members)
	s.APIServer.ServiceType = knestv1.ServiceTypeNodePort
	s.Workers = []knestv1.WorkerPool{{Name: knestv1.DefaultPoolName, Replicas: ptr.To[int32](0)}}
	return nc
}

// step creates the tenants up to n at once, waits until all are Ready, lets them
// rest, and measures.
func (b *bench) step(ctx context.Context, n int) (stepResult, error) {
	first := len(b.tenants) + 1
	start := time.Now()
	ready := make([]float64, n-first+1)
	errs := make([]error, len(ready))
	var wg sync.WaitGroup
	for i := first; i <= n; i++ {
		key := b.key(i)
		b.tenants = append(b.tenants, key)
		wg.Go(func() {
			if err := b.create(ctx, key); err != nil {
				errs[i-first] = err
				return
			}
			if err := b.kc.Wait(ctx, key, knest.WaitWithTimeout(b.o.timeout-time.Since(start))); err != nil {
				errs[i-first] = err
				return
			}
			ready[i-first] = time.Since(start).Seconds()
			fmt.Printf("%6.0fs  %s Ready\n", ready[i-first], key.Namespace)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return stepResult{}, err
	}
	fmt.Printf("%d tenants Ready; resting %s before measuring\n", n, b.o.rest)
	select {
	case <-ctx.Done():
		return stepResult{}, ctx.Err()
	case <-time.After(b.o.rest):
	}
	st, err := b.measure(ctx, n)
	st.Created, st.ReadySeconds = len(ready), ready
	return st, err
}

func (b *bench) create(ctx context.Context, key client.ObjectKey) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace, Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return b.kc.Create(ctx, b.nestedCluster(key))
}

// measure reads every kubelet twice, a window apart, while every tenant's API
// server is asked a GET each probe interval.
func (b *bench) measure(ctx context.Context, n int) (stepResult, error) {
	st := stepResult{Tenants: n}
	var probes []*prober
	for _, key := range b.tenants {
		p, err := b.prober(ctx, key)
		if err != nil {
			return st, err
		}
		probes = append(probes, p)
	}
	s0, err := scrape(ctx, b.cs, b.nodes)
	if err != nil {
		return st, err
	}
	pctx, stop := context.WithTimeout(ctx, b.o.window)
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Go(func() { p.run(pctx, b.o.probeEvery) })
	}
	<-pctx.Done() // the whole window, with or without tenants to probe
	wg.Wait()
	stop()
	if err := ctx.Err(); err != nil {
		return st, err
	}
	s1, err := scrape(ctx, b.cs, b.nodes)
	if err != nil {
		return st, err
	}
	capacity, restarts, err := hostCapacity(ctx, b.cs)
	if err != nil {
		return st, err
	}
	st.Capacity = capacity
	tenants := b.tenantNamespaces()
	for ns := range tenants {
		st.Restarts += restarts[ns]
	}
	st.summarize(s0, s1, tenants, b.o.stack)
	st.GET = latencies(probes)
	return st, nil
}

func (b *bench) tenantNamespaces() map[string]bool {
	out := map[string]bool{}
	for _, k := range b.tenants {
		out[k.Namespace] = true
	}
	return out
}

// prober reaches the tenant's API server through its Service's NodePort on the first
// host node, as a user outside the host would.
func (b *bench) prober(ctx context.Context, key client.ObjectKey) (*prober, error) {
	svc, err := b.cs.CoreV1().Services(key.Namespace).Get(ctx, hosted.ServiceName(key.Name), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	node, err := b.cs.CoreV1().Nodes().Get(ctx, b.nodes[0], metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip == "" || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return nil, fmt.Errorf("%s: no NodePort on %s to reach its API server", key, b.nodes[0])
	}
	kubeconfig, err := b.kc.Kubeconfig(ctx, key, knest.KubeconfigWithServer("https://"+ip+":"+strconv.Itoa(int(svc.Spec.Ports[0].NodePort))))
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, 10*time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &prober{cs: cs}, nil
}

// deleteAll deletes every tenant the run created and waits until each is gone, then
// its namespace.
func (b *bench) deleteAll(ctx context.Context) error {
	start := time.Now()
	errs := make([]error, len(b.tenants))
	var wg sync.WaitGroup
	for i, key := range b.tenants {
		wg.Go(func() {
			err := b.kc.Delete(ctx, key.Namespace, []string{key.Name}, knest.DeleteWithWait(25*time.Minute), knest.DeleteIgnoreNotFound(true))
			if err == nil {
				err = b.cs.CoreV1().Namespaces().Delete(ctx, key.Namespace, metav1.DeleteOptions{})
			}
			errs[i] = client.IgnoreNotFound(err)
		})
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "deleted %d tenants in %.0fs\n", len(b.tenants), time.Since(start).Seconds())
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
