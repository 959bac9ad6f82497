package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
)

const benchNamespace = "bench"

// graphKind is one kind of the object graph and how many of it each NestedCluster
// (with one worker pool and the default flannel CNI) renders.
type graphKind struct {
	gvk        schema.GroupVersionKind
	perCluster int
}

var graphKinds = []graphKind{
	{clusterv1.GroupVersion.WithKind("Cluster"), 1},
	{capkv1.GroupVersion.WithKind("KubevirtCluster"), 1},
	{controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"), 1},
	{capkv1.GroupVersion.WithKind("KubevirtMachineTemplate"), 2},
	{bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate"), 1},
	{clusterv1.GroupVersion.WithKind("MachineDeployment"), 1},
	{clusterv1.GroupVersion.WithKind("MachineHealthCheck"), 2},
	{addonsv1.GroupVersion.WithKind("ClusterResourceSet"), 1},
	{corev1.SchemeGroupVersion.WithKind("ConfigMap"), 1},
}

// runConfig is what one run needs to know.
type runConfig struct {
	N             int
	Controller    controllerOptions
	Separate      bool
	CreateWorkers int
	Idle          time.Duration
	Rest          time.Duration
	Poll          time.Duration
	Timeout       time.Duration
}

// reqCount is one row of a request breakdown.
type reqCount struct {
	reqKey
	Count int `json:"count"`
	// LatencyMs is the total time from sending to the response headers (after
	// client-side rate limiting, which happens before the transport).
	LatencyMs float64 `json:"latencyMs,omitempty"`
}

// runResult is what one run measured. Durations are seconds from the first create.
type runResult struct {
	N int `json:"n"`

	TestenvStartSeconds float64 `json:"testenvStartSeconds"`
	CreateSeconds       float64 `json:"createSeconds"`
	// GraphSeconds: first poll that saw every object of every graph.
	GraphSeconds float64 `json:"graphSeconds"`
	// StatusSeconds: first poll that saw the graphs and every observedGeneration.
	StatusSeconds float64 `json:"statusSeconds"`
	// ConvergedSeconds: the last controller write before the controller went idle.
	ConvergedSeconds float64 `json:"convergedSeconds"`
	// ConvergedNoEventsSeconds: the same, ignoring Event writes.
	ConvergedNoEventsSeconds float64 `json:"convergedNoEventsSeconds"`

	CreateWrites    int        `json:"createWrites"`
	CreateFailures  int        `json:"createFailures"`
	CreateRequests  []reqCount `json:"createRequests"`
	RestWrites      int        `json:"restWrites"`
	RestRequests    []reqCount `json:"restRequests"`
	RestSeconds     float64    `json:"restSeconds"`
	Reconciles      int        `json:"reconciles"`
	ReconcileErrors int        `json:"reconcileErrors"`
	ReconcileMeanMs float64    `json:"reconcileMeanMs"`
	QueueWaitMeanMs float64    `json:"queueWaitMeanMs"`

	// Baseline is the controller process's memory just before the first create
	// (caches synced and empty); End is after the rest period.
	Baseline memStats `json:"baseline"`
	End      memStats `json:"end"`

	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1, 5 and 15 minute figures
	// when the test bed was up and at the end: other work on the machine shows here.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

// runOnce starts a fresh test bed, runs the controller against it and measures.
func runOnce(ctx context.Context, rc runConfig) (_ *runResult, retErr error) {
	res := &runResult{N: rc.N}
	started := time.Now()
	env, err := testenv.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	res.TestenvStartSeconds = time.Since(started).Seconds()
	res.LoadAvgStart = loadAvg()
	fmt.Fprintf(os.Stderr, "  test bed started in %.1fs; load average %s\n", res.TestenvStartSeconds, res.LoadAvgStart)

	// The benchmark's own client: not counted, not rate limited.
	benchCfg := rest.CopyConfig(env.Config)
	benchCfg.QPS, benchCfg.Burst = -1, 0
	benchCfg.UserAgent = "knest-bench"
	c, err := client.New(benchCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace, Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}); err != nil {
		return nil, err
	}

	var cut controllerUnderTest
	if rc.Separate {
		cut, err = startRemote(ctx, env.KubeconfigPath, rc.Controller)
	} else {
		cut, err = startLocal(ctx, env.Config, rc.Controller)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := cut.stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("controller: %w", err))
		}
	}()
	if res.Baseline, err = cut.baseline(); err != nil {
		return nil, err
	}
	metricsBefore, err := cut.reconcileMetrics()
	if err != nil {
		return nil, err
	}

	// Create N NestedClusters at once.
	t0 := time.Now()
	if err := createClusters(ctx, c, rc.N, rc.CreateWorkers); err != nil {
		return nil, err
	}
	res.CreateSeconds = time.Since(t0).Seconds()
	progressCtx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go reportProgress(progressCtx, rc.N, t0, cut, 10*time.Second)

	// Wait for the graphs, the status, and then for the controller to go idle.
	deadline := time.Now().Add(rc.Timeout)
	var graphAt, statusAt time.Time
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not converged after %s (graph complete: %v, status complete: %v)",
				rc.Timeout, !graphAt.IsZero(), !statusAt.IsZero())
		}
		if statusAt.IsZero() {
			graphOK, statusOK, err := converged(ctx, c, rc.N, graphAt.IsZero())
			if err != nil {
				return nil, err
			}
			now := time.Now()
			if graphOK && graphAt.IsZero() {
				graphAt = now
			}
			if graphOK && statusOK {
				statusAt = now
			}
		}
		if !statusAt.IsZero() {
			s, err := cut.snapshot()
			if err != nil {
				return nil, err
			}
			if time.Since(s.lastWriteTime()) >= rc.Idle {
				// Make sure nothing regressed while we waited.
				if graphOK, statusOK, err := converged(ctx, c, rc.N, true); err != nil {
					return nil, err
				} else if graphOK && statusOK {
					break
				}
				statusAt = time.Time{}
			}
		}
		time.Sleep(rc.Poll)
	}
	stopProgress()
	idle, err := cut.snapshot()
	if err != nil {
		return nil, err
	}
	res.GraphSeconds = graphAt.Sub(t0).Seconds()
	res.StatusSeconds = statusAt.Sub(t0).Seconds()
	res.ConvergedSeconds = idle.lastWriteTime().Sub(t0).Seconds()
	res.ConvergedNoEventsSeconds = idle.lastWriteTime("events").Sub(t0).Seconds()
	res.CreateWrites = idle.writes()
	res.CreateRequests = idle.counts()
	for k, v := range idle.Failures {
		if k.write() {
			res.CreateFailures += v
		}
	}
	metricsAfter, err := cut.reconcileMetrics()
	if err != nil {
		return nil, err
	}
	res.Reconciles = int(metricsAfter.Reconciles - metricsBefore.Reconciles)
	res.ReconcileErrors = int(metricsAfter.Errors - metricsBefore.Errors)
	if n := metricsAfter.ReconcileCount - metricsBefore.ReconcileCount; n > 0 {
		res.ReconcileMeanMs = 1000 * (metricsAfter.ReconcileSum - metricsBefore.ReconcileSum) / n
	}
	if n := metricsAfter.QueueCount - metricsBefore.QueueCount; n > 0 {
		res.QueueWaitMeanMs = 1000 * (metricsAfter.QueueSum - metricsBefore.QueueSum) / n
	}

	// At rest: nothing changes, so nothing should be written.
	restStart := time.Now()
	select {
	case <-time.After(rc.Rest):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rest, err := cut.snapshot()
	if err != nil {
		return nil, err
	}
	res.RestSeconds = time.Since(restStart).Seconds()
	res.RestRequests = rest.minus(idle)
	for _, rc := range res.RestRequests {
		if rc.write() {
			res.RestWrites += rc.Count
		}
	}

	if res.End, err = cut.memory(); err != nil {
		return nil, err
	}
	res.LoadAvgEnd = loadAvg()
	return res, nil
}

// watchedObjects are the kinds the NestedCluster controller watches.
func watchedObjects() []client.Object {
	return []client.Object{
		&knestv1.NestedCluster{},
		&clusterv1.Cluster{},
		&capkv1.KubevirtCluster{},
		&capkv1.KubevirtMachineTemplate{},
		&controlplanev1.KubeadmControlPlane{},
		&bootstrapv1.KubeadmConfigTemplate{},
		&clusterv1.MachineDeployment{},
		&clusterv1.MachineHealthCheck{},
		&addonsv1.ClusterResourceSet{},
		&corev1.ConfigMap{},
	}
}

func createClusters(ctx context.Context, c client.Client, n, workers int) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	for range max(min(workers, n), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				nc := &knestv1.NestedCluster{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", i), Namespace: benchNamespace},
					Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{
						{Name: "workers"},
					}},
				}
				if err := c.Create(ctx, nc); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("failed to create NestedCluster %s: %w", nc.Name, err)
					}
					errMu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// converged reports whether every graph object exists (counted by kind, with the
// knest.dev/cluster label) and whether every NestedCluster's status has observed its
// generation. The status is only read once the graphs are complete.
func converged(ctx context.Context, c client.Client, n int, checkGraph bool) (graphOK, statusOK bool, _ error) {
	if checkGraph {
		objects, want := 0, 0
		for _, k := range graphKinds {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(benchNamespace), client.HasLabels{knestv1.ClusterNameLabel}); err != nil {
				return false, false, fmt.Errorf("failed to list %s: %w", k.gvk.Kind, err)
			}
			objects += min(len(list.Items), n*k.perCluster)
			want += n * k.perCluster
		}
		progress.Store(fmt.Sprintf("%d/%d graph objects", objects, want))
		if objects < want {
			return false, false, nil
		}
	}
	ncs := &knestv1.NestedClusterList{}
	if err := c.List(ctx, ncs, client.InNamespace(benchNamespace)); err != nil {
		return true, false, fmt.Errorf("failed to list NestedClusters: %w", err)
	}
	observed := 0
	for _, nc := range ncs.Items {
		if nc.Status.ObservedGeneration == nc.Generation {
			observed++
		}
	}
	progress.Store(fmt.Sprintf("graphs complete, %d/%d NestedClusters observed", observed, n))
	return true, len(ncs.Items) == n && observed == n, nil
}

// progress is what the convergence check last saw, for the progress lines.
var progress atomic.Value

// reportProgress prints a progress line every interval until ctx ends.
func reportProgress(ctx context.Context, n int, t0 time.Time, cut controllerUnderTest, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p, _ := progress.Load().(string)
			writes := -1
			if s, err := cut.snapshot(); err == nil {
				writes = s.writes()
			}
			fmt.Fprintf(os.Stderr, "  N=%d +%.0fs: %s; controller writes so far %d; load %s\n",
				n, time.Since(t0).Seconds(), p, writes, loadAvg())
		}
	}
}
