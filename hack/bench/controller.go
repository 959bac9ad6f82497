package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/knest-dev/knest/internal/manager"
)

// controllerOptions configure the controller under test.
type controllerOptions struct {
	Concurrency int
	QPS         float32
	Burst       int
	Trace       []string
	TraceMax    int
}

// memStats is the controller process's memory.
type memStats struct {
	// HeapInuseMiB is runtime.MemStats.HeapInuse right after runtime.GC().
	HeapInuseMiB float64 `json:"heapInuseMiB"`
	// PeakHeapMiB is the highest HeapInuse sampled every 100ms since the baseline
	// (garbage included, which is what RSS follows).
	PeakHeapMiB float64 `json:"peakHeapMiB"`
	RSSMiB      float64 `json:"rssMiB"`
	// PeakRSSMiB is VmHWM, reset at the baseline.
	PeakRSSMiB float64 `json:"peakRssMiB"`
}

// controllerUnderTest is the NestedCluster controller being measured: in the
// benchmark's process or in a process of its own.
type controllerUnderTest interface {
	// baseline resets the request counts, the peak RSS and the peak heap, and
	// returns the memory at that moment.
	baseline() (memStats, error)
	snapshot() (snapshot, error)
	reconcileMetrics() (reconcileMetrics, error)
	memory() (memStats, error)
	stop() error
}

// localController runs the controller in this process.
type localController struct {
	cnt      *counter
	peakHeap atomic.Uint64
	cancel   context.CancelFunc
	done     chan error
}

// startLocal starts the controller, built by manager.New, on a copy of cfg whose
// transport counts every request, and returns once its caches have synced.
func startLocal(ctx context.Context, cfg *rest.Config, o controllerOptions) (*localController, error) {
	l := &localController{cnt: newCounter(), done: make(chan error, 1)}
	l.cnt.traceMax, l.cnt.trace = o.TraceMax, map[string]int{}
	for _, r := range o.Trace {
		l.cnt.trace[r] = 0
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.Wrap(l.cnt.wrap)
	mgr, err := manager.New(cfg, manager.Options{Concurrency: o.Concurrency, ToolImage: "knest:bench"})
	if err != nil {
		return nil, err
	}
	// Register the controller's informers up front so that "cache synced" below
	// means the controller can see everything before the first create.
	for _, obj := range watchedObjects() {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("failed to register informer for %T: %w", obj, err)
		}
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	go func() { l.done <- mgr.Start(mgrCtx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	synced := mgr.GetCache().WaitForCacheSync(syncCtx)
	cancelSync()
	if !synced {
		_ = l.stop()
		return nil, errors.New("controller cache did not sync")
	}
	time.Sleep(time.Second) // let the controller start its workers
	go l.samplePeakHeap(mgrCtx, 100*time.Millisecond)
	return l, nil
}

func (l *localController) samplePeakHeap(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		for {
			old := l.peakHeap.Load()
			if ms.HeapInuse <= old || l.peakHeap.CompareAndSwap(old, ms.HeapInuse) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *localController) baseline() (memStats, error) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := resetPeakRSS(); err != nil {
		return memStats{}, fmt.Errorf("failed to reset the peak RSS: %w", err)
	}
	l.peakHeap.Store(0)
	l.cnt.reset()
	return l.memory()
}

func (l *localController) snapshot() (snapshot, error) { return l.cnt.snapshot(), nil }

func (l *localController) reconcileMetrics() (reconcileMetrics, error) {
	return gatherReconcileMetrics()
}

func (l *localController) memory() (memStats, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memStats{
		HeapInuseMiB: mib(ms.HeapInuse),
		PeakHeapMiB:  mib(max(l.peakHeap.Load(), ms.HeapInuse)),
	}
	var err error
	m.RSSMiB, m.PeakRSSMiB, err = procStatusMiB()
	return m, err
}

func (l *localController) stop() error {
	l.cancel()
	return <-l.done
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// serveController is the -controller-kubeconfig mode: the controller alone in
// this process, driven over HTTP on localhost by the measuring process.
func serveController(ctx context.Context, kubeconfig string, o controllerOptions) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	l, err := startLocal(ctx, cfg, o)
	if err != nil {
		return err
	}
	defer func() { _ = l.stop() }()

	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := json.NewEncoder(w).Encode(v); err != nil {
			fmt.Fprintf(os.Stderr, "replying: %v\n", err)
		}
	}
	mux.HandleFunc("POST /baseline", func(w http.ResponseWriter, _ *http.Request) {
		m, err := l.baseline()
		reply(w, m, err)
	})
	mux.HandleFunc("GET /snapshot", func(w http.ResponseWriter, _ *http.Request) {
		s, err := l.snapshot()
		reply(w, s, err)
	})
	mux.HandleFunc("GET /reconcile-metrics", func(w http.ResponseWriter, _ *http.Request) {
		m, err := l.reconcileMetrics()
		reply(w, m, err)
	})
	mux.HandleFunc("GET /memory", func(w http.ResponseWriter, _ *http.Request) {
		m, err := l.memory()
		reply(w, m, err)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("LISTEN %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// remoteController is a controller in a process of its own (serveController).
type remoteController struct {
	cmd  *exec.Cmd
	base string
	http *http.Client
	done chan error
}

func startRemote(ctx context.Context, kubeconfig string, o controllerOptions) (*remoteController, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{
		"-controller-kubeconfig", kubeconfig,
		"-concurrency", fmt.Sprint(o.Concurrency),
		"-qps", fmt.Sprint(o.QPS),
		"-burst", fmt.Sprint(o.Burst),
		"-trace", strings.Join(o.Trace, ","),
		"-trace-max", fmt.Sprint(o.TraceMax),
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &remoteController{cmd: cmd, http: &http.Client{Timeout: 2 * time.Minute}, done: make(chan error, 1)}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				listening <- addr
				break
			}
			fmt.Fprintln(os.Stderr, sc.Text())
		}
		_, _ = io.Copy(os.Stderr, stdout)
		r.done <- cmd.Wait()
	}()
	select {
	case addr := <-listening:
		r.base = "http://" + addr
		return r, nil
	case err := <-r.done:
		return nil, fmt.Errorf("controller process exited before it was ready: %v", err)
	case <-time.After(2 * time.Minute):
		_ = r.stop()
		return nil, errors.New("controller process not ready after 2m")
	case <-ctx.Done():
		_ = r.stop()
		return nil, ctx.Err()
	}
}

func (r *remoteController) call(method, path string, out any) error {
	req, err := http.NewRequest(method, r.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (r *remoteController) baseline() (m memStats, err error) {
	return m, r.call(http.MethodPost, "/baseline", &m)
}

func (r *remoteController) snapshot() (s snapshot, err error) {
	return s, r.call(http.MethodGet, "/snapshot", &s)
}

func (r *remoteController) reconcileMetrics() (m reconcileMetrics, err error) {
	return m, r.call(http.MethodGet, "/reconcile-metrics", &m)
}

func (r *remoteController) memory() (m memStats, err error) {
	return m, r.call(http.MethodGet, "/memory", &m)
}

func (r *remoteController) stop() error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		return err
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		return <-r.done
	}
}

// reconcileMetrics are controller-runtime's counters for the NestedCluster
// controller, read from its in-process Prometheus registry.
type reconcileMetrics struct {
	Reconciles     float64 `json:"reconciles"`
	Errors         float64 `json:"errors"`
	ReconcileSum   float64 `json:"reconcileSum"`
	ReconcileCount float64 `json:"reconcileCount"`
	QueueSum       float64 `json:"queueSum"`
	QueueCount     float64 `json:"queueCount"`
}

func gatherReconcileMetrics() (reconcileMetrics, error) {
	var m reconcileMetrics
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return m, fmt.Errorf("failed to gather metrics: %w", err)
	}
	const controllerName = "nestedcluster"
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				if label(s, "controller") == controllerName {
					m.Reconciles += s.GetCounter().GetValue()
				}
			case "controller_runtime_reconcile_errors_total":
				if label(s, "controller") == controllerName {
					m.Errors += s.GetCounter().GetValue()
				}
			case "controller_runtime_reconcile_time_seconds":
				if label(s, "controller") == controllerName {
					m.ReconcileSum += s.GetHistogram().GetSampleSum()
					m.ReconcileCount += float64(s.GetHistogram().GetSampleCount())
				}
			case "workqueue_queue_duration_seconds":
				if label(s, "name") == controllerName {
					m.QueueSum += s.GetHistogram().GetSampleSum()
					m.QueueCount += float64(s.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return m, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
