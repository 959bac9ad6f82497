//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// servicePoller measures a tenant workload's availability from where an upgrade
// cannot move it: this process. An upgrade replaces every tenant node, so a poller
// pod would be evicted with its node, and the tenant API moves with the control
// plane. Once a second it asks the workload's NodePort on every live node of the
// cluster at once (the VMIs the host runs, re-read each time, as machines come and
// go); the request is served if any node answers. Every 2 s it also counts, through
// the tenant API, the workload's Ready replicas and checks that its
// PodDisruptionBudget exists; a sample the tenant API did not answer (the control
// plane being swapped) is recorded as unanswered, never as zero replicas.
type servicePoller struct {
	key      client.ObjectKey // the tenant cluster
	nodePort int
	tenant   client.Client // short timeouts: an unanswered sample must not hold up the next
	host     kubernetes.Interface
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	ticks   []pollTick
	samples []replicaSample
	nodes   []kubevirtv1.VirtualMachineInstance // the live nodes last read from the host
}

// pollTick is one request to the workload, sent to every live node.
type pollTick struct {
	At     time.Time
	Nodes  int      // live nodes asked
	Served string   // the node that answered first; "" if none did
	Errs   []string // why each node failed, when none answered
}

// replicaSample is what the tenant API said at one moment.
type replicaSample struct {
	At       time.Time
	Answered bool
	Ready    int  // Ready replicas not being deleted
	PDB      bool // the PodDisruptionBudget exists
}

const (
	pollEvery     = time.Second
	sampleEvery   = 2 * time.Second
	askTimeout    = 3 * time.Second // per request to a node
	sampleTimeout = 5 * time.Second
)

// startPoller polls the echo workload's NodePort of the cluster until stop.
func startPoller(ctx context.Context, key client.ObjectKey, tc tenant, nodePort int) (*servicePoller, error) {
	cfg := rest.CopyConfig(tc.cfg)
	cfg.Timeout = sampleTimeout
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	hostCfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		cancel()
		return nil, err
	}
	hostCfg.Timeout = askTimeout
	host, err := kubernetes.NewForConfig(hostCfg)
	if err != nil {
		cancel()
		return nil, err
	}
	p := &servicePoller{key: key, nodePort: nodePort, tenant: c, host: host, cancel: cancel}
	p.wg.Go(func() { every(ctx, pollEvery, p.ask) })
	p.wg.Go(func() { every(ctx, sampleEvery, p.sample) })
	return p, nil
}

// every runs f now and then at each tick until ctx ends; a slow f delays the next
// run rather than stacking runs.
func every(ctx context.Context, d time.Duration, f func(context.Context)) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ask sends one request to every live node and records whether any answered.
func (p *servicePoller) ask(ctx context.Context) {
	tick := pollTick{At: time.Now()}
	nodes := p.liveNodes(ctx)
	tick.Nodes = len(nodes)
	askCtx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	type answer struct {
		node string
		err  error
	}
	answers := make(chan answer, len(nodes))
	for i := range nodes {
		go func() { answers <- answer{nodes[i].Name, p.get(askCtx, &nodes[i])} }()
	}
	for range nodes {
		a := <-answers
		if a.err == nil {
			tick.Served = a.node
			break
		}
		tick.Errs = append(tick.Errs, a.node+": "+a.err.Error())
	}
	if tick.Served == "" && len(nodes) == 0 {
		tick.Errs = append(tick.Errs, "no live node")
	}
	if ctx.Err() != nil {
		return // stopped mid-request: not a failure of the workload
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ticks = append(p.ticks, tick)
}

// liveNodes lists the cluster's running VMIs with an address; when the host does
// not answer, the last list stands.
func (p *servicePoller) liveNodes(ctx context.Context) []kubevirtv1.VirtualMachineInstance {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.host.List(ctx, vmis, client.InNamespace(p.key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: p.key.Name}); err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.Clone(p.nodes)
	}
	live := slices.DeleteFunc(vmis.Items, func(vmi kubevirtv1.VirtualMachineInstance) bool {
		return vmi.Status.Phase != kubevirtv1.Running || len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == ""
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = live
	return slices.Clone(live)
}

// get asks one node's NodePort for the echo page through the host API server's
// proxy to the node's virt-launcher pod (the VM has the pod's address), as a user
// outside the host network would; the API server opens a fresh connection each
// time, so kube-proxy in the node picks a replica each time. (KubeVirt's
// port-forward does not reach a NodePort of a guest on bridge binding: kube-proxy's
// reply to the forward's source does not find its way back.)
func (p *servicePoller) get(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	pods := &corev1.PodList{}
	if err := s.host.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{"vm.kubevirt.io/name": vmi.Name}); err != nil {
		return err
	}
	var launcher string
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp.IsZero() {
			launcher = pod.Name
		}
	}
	if launcher == "" {
		return fmt.Errorf("no running virt-launcher pod of %s", vmi.Name)
	}
	body, err := p.host.CoreV1().Pods(vmi.Namespace).ProxyGet("http", launcher, strconv.Itoa(p.nodePort), "/", nil).DoRaw(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(body), "hello from "+echoName) {
		return fmt.Errorf("unexpected answer: %q", body)
	}
	return nil
}

// sample records the workload's Ready replicas and whether its
// PodDisruptionBudget exists, as the tenant API says.
func (p *servicePoller) sample(ctx context.Context) {
	smp := replicaSample{At: time.Now()}
	pods := &corev1.PodList{}
	err := p.tenant.List(ctx, pods, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels{"app": echoName})
	if err == nil {
		err = p.tenant.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: echoName}, &policyv1.PodDisruptionBudget{})
		smp.PDB = err == nil
		if apierrors.IsNotFound(err) {
			err = nil
		}
	}
	if ctx.Err() != nil {
		return
	}
	if smp.Answered = err == nil; smp.Answered {
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp.IsZero() && podReady(&pod) {
				smp.Ready++
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, smp)
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// served reports whether any request has been answered yet.
func (p *servicePoller) served() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.ticks, func(t pollTick) bool { return t.Served != "" })
}

// stop ends the polling and reports what was seen since the given time.
func (p *servicePoller) stop(since time.Time) pollReport {
	p.cancel()
	p.wg.Wait()
	r := pollReport{Since: since, MinReady: -1}
	var open *failureWindow
	for _, t := range p.ticks {
		if t.At.Before(since) {
			continue
		}
		r.Sent++
		switch {
		case t.Served == "" && open == nil:
			r.Failed++
			r.Windows = append(r.Windows, failureWindow{Start: t.At, Errs: t.Errs, Open: true})
			open = &r.Windows[len(r.Windows)-1]
		case t.Served == "":
			r.Failed++
			open.Length = t.At.Sub(open.Start)
		case open != nil:
			// The workload was not seen answering from the first failure until now.
			open.Length, open.Open = t.At.Sub(open.Start), false
			open = nil
		}
	}
	for _, w := range r.Windows {
		r.Longest = max(r.Longest, w.Length)
	}
	for _, smp := range p.samples {
		if smp.At.Before(since) {
			continue
		}
		r.Samples++
		if !smp.Answered {
			continue
		}
		r.Answered++
		if r.MinReady < 0 || smp.Ready < r.MinReady {
			r.MinReady, r.MinReadyAt = smp.Ready, smp.At
		}
		if !smp.PDB {
			r.PDBMissing = append(r.PDBMissing, smp.At)
		}
	}
	return r
}

// pollReport is what the poller saw.
type pollReport struct {
	Since        time.Time
	Sent, Failed int
	Windows      []failureWindow
	Longest      time.Duration
	// Replica samples: taken, answered by the tenant API, the fewest Ready replicas
	// an answer reported (-1 if none answered) and when.
	Samples, Answered int
	MinReady          int
	MinReadyAt        time.Time
	PDBMissing        []time.Time
}

// failureWindow is a run of requests no node answered: from the first failed
// request to the next served one (Open: none was served after it).
type failureWindow struct {
	Start  time.Time
	Length time.Duration
	Open   bool
	Errs   []string // of the first failed request
}

// windows lists the failure windows as "<s after Since> (<length>)".
func (r pollReport) windows() string {
	if len(r.Windows) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(r.Windows))
	for _, w := range r.Windows {
		p := fmt.Sprintf("%.0f s (%s)", w.Start.Sub(r.Since).Seconds(), w.Length.Round(time.Second))
		if w.Open {
			p += " until the end"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
