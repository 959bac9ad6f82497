// Command bench measures the NestedCluster controller against a real API server:
// how long N NestedClusters created at once take to converge, how many API writes
// the controller makes per cluster and at rest, and how much memory it holds.
//
// Every run is a fresh child process (so heap and peak RSS are that run's own)
// with a fresh test bed (etcd, kube-apiserver, kube-controller-manager with the
// real CRDs; see internal/testenv), so runs do not share API server or etcd state.
// The controller runs in-process, built by manager.New, on a rest.Config whose
// transport counts every request it sends. The benchmark's own clients (creating
// the NestedClusters, polling for convergence) are separate and not counted.
//
// Run it with `make bench`; docs/benchmark.md explains the figures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

type options struct {
	// args are the command-line arguments (those of the saved run with -results).
	args          []string
	sizesFlag     string
	results       string
	sizes         []int
	runs          int
	out           string
	concurrency   int
	qps           float64
	burst         int
	createWorkers int
	idle          time.Duration
	rest          time.Duration
	poll          time.Duration
	timeout       time.Duration
	trace         string
	traceMax      int
	separate      bool
	// controllerKubeconfig makes this process the controller alone (see
	// -controller-process), driven by the measuring process.
	controllerKubeconfig string
	// childResult makes this process a single run that writes its result there.
	childResult string
	childN      int
}

func registerFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.sizesFlag, "n", "100,500", "Comma-separated numbers of NestedClusters to create at once")
	fs.IntVar(&o.runs, "runs", 3, "Runs per size, each on a fresh test bed")
	fs.StringVar(&o.out, "out", "", "Also write the report as markdown to this file, and the raw results as JSON next to it")
	fs.StringVar(&o.results, "results", "", "Do not run: re-render the report of a results JSON file that -out wrote")
	fs.IntVar(&o.concurrency, "concurrency", 10, "Controller concurrency (manager.Options.Concurrency); 10 is `knest controller`'s default")
	fs.Float64Var(&o.qps, "qps", 0, "QPS of the controller's rest.Config; 0 keeps client-go's default (5 QPS, burst 10, per API resource), which is what `knest controller` runs with; -1 disables client-side rate limiting")
	fs.IntVar(&o.burst, "burst", 0, "Burst of the controller's rest.Config; 0 keeps client-go's default (10)")
	fs.IntVar(&o.createWorkers, "create-workers", 32, "Concurrent creates of the benchmark's own (uncounted) client")
	fs.DurationVar(&o.idle, "idle", 2*time.Second, "The controller is idle after this long without a write")
	fs.DurationVar(&o.rest, "rest", 60*time.Second, "How long to count writes at rest, after the controller went idle")
	fs.DurationVar(&o.poll, "poll", 500*time.Millisecond, "Interval of the convergence checks (the converged time itself is the last write's timestamp, not a poll)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "Give up on a run that has not converged after this long")
	fs.StringVar(&o.trace, "trace", "", "Comma-separated resources (e.g. nestedclusters/status) whose controller writes are printed, for diagnosis")
	fs.IntVar(&o.traceMax, "trace-max", 5, "Writes printed per traced resource")
	fs.BoolVar(&o.separate, "controller-process", false, "Run the controller in a process of its own (same manager.New and counting transport), so its memory figures exclude the benchmark's test bed CRDs and clients")
	fs.StringVar(&o.controllerKubeconfig, "controller-kubeconfig", "", "Internal: run only the controller against this kubeconfig")
	fs.StringVar(&o.childResult, "child-result", "", "Internal: run once and write the result as JSON to this file")
	fs.IntVar(&o.childN, "child-n", 0, "Internal: the size of the child run")
}

func main() {
	o := options{args: os.Args[1:]}
	registerFlags(flag.CommandLine, &o)
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var err error
	switch {
	case o.controllerKubeconfig != "":
		setLogger()
		err = serveController(ctx, o.controllerKubeconfig, o.controllerOptions())
	case o.childResult != "":
		err = child(ctx, o)
	case o.results != "":
		err = rerender(o, o.results)
	default:
		if o.sizes, err = parseSizes(o.sizesFlag); err == nil {
			err = parent(ctx, o)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-n: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// setLogger keeps only errors: the controller's logs would drown the report.
func setLogger() {
	logger := logr.New(errorSink{})
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}

func (o options) controllerOptions() controllerOptions {
	return controllerOptions{
		Concurrency: o.concurrency,
		QPS:         float32(o.qps),
		Burst:       o.burst,
		Trace:       splitList(o.trace),
		TraceMax:    o.traceMax,
	}
}

// child is one run in its own process.
func child(ctx context.Context, o options) error {
	setLogger()
	res, err := runOnce(ctx, runConfig{
		N:             o.childN,
		Controller:    o.controllerOptions(),
		Separate:      o.separate,
		CreateWorkers: o.createWorkers,
		Idle:          o.idle,
		Rest:          o.rest,
		Poll:          o.poll,
		Timeout:       o.timeout,
	})
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(o.childResult, b, 0o644)
}

// parent runs every (size, run) as a child process and reports.
func parent(ctx context.Context, o options) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "knest-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	m := describeMachine()
	fmt.Printf("knest controller benchmark: sizes %v, %d runs each, %s\n", o.sizes, o.runs, describeSettings(o))
	fmt.Printf("machine: %d CPUs (%s), %s RAM, Linux %s, %s\n\n", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go)
	results := map[int][]*runResult{}
	var failures []string
	for _, n := range o.sizes {
		for r := 1; r <= o.runs; r++ {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "N=%d run %d/%d: starting a fresh test bed...\n", n, r, o.runs)
			path := filepath.Join(dir, fmt.Sprintf("n%d-r%d.json", n, r))
			cmd := exec.CommandContext(ctx, self, append(append([]string{}, o.args...), "-child-result", path, "-child-n", strconv.Itoa(n))...)
			// On interrupt let the child stop its test bed rather than kill it.
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = time.Minute
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				failures = append(failures, fmt.Sprintf("N=%d run %d: %v", n, r, err))
				fmt.Fprintf(os.Stderr, "N=%d run %d/%d FAILED: %v\n", n, r, o.runs, err)
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			res := &runResult{}
			if err := json.Unmarshal(b, res); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "N=%d run %d/%d: converged %.1fs, %.2f writes/cluster, %d writes at rest, heap %.0f MiB, peak RSS %.0f MiB\n",
				n, r, o.runs, res.ConvergedSeconds, float64(res.CreateWrites)/float64(n), res.RestWrites, res.End.HeapInuseMiB, res.End.PeakRSSMiB)
			results[n] = append(results[n], res)
		}
	}

	if o.out != "" {
		// The raw results, to re-render the report (-results) without running again.
		if err := writeResults(strings.TrimSuffix(o.out, filepath.Ext(o.out))+".json", o, m, results, failures); err != nil {
			return err
		}
	}
	return writeReport(o, m, results, failures)
}

// savedResults is what -out saves next to the report and -results reads.
type savedResults struct {
	Args     []string             `json:"args"`
	Machine  machine              `json:"machine"`
	Results  map[int][]*runResult `json:"results"`
	Failures []string             `json:"failures"`
}

func writeResults(path string, o options, m machine, results map[int][]*runResult, failures []string) error {
	b, err := json.MarshalIndent(savedResults{Args: o.args, Machine: m, Results: results, Failures: failures}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// rerender prints (and with -out writes) the report of a saved results file.
func rerender(o options, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var saved savedResults
	if err := json.Unmarshal(b, &saved); err != nil {
		return err
	}
	// The settings are those of the run that produced the results.
	fs := flag.NewFlagSet("saved", flag.ContinueOnError)
	ro := o
	registerFlags(fs, &ro)
	if err := fs.Parse(saved.Args); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ro.args, ro.out, ro.sizes = saved.Args, o.out, nil
	for n := range saved.Results {
		ro.sizes = append(ro.sizes, n)
	}
	slices.Sort(ro.sizes)
	return writeReport(ro, saved.Machine, saved.Results, saved.Failures)
}

func writeReport(o options, m machine, results map[int][]*runResult, failures []string) error {
	rep := buildReport(o, m, results, failures)
	fmt.Println(rep.text())
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.out, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		fmt.Printf("Report written to %s\n", o.out)
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

func describeSettings(o options) string {
	limit := "client-go default rate limit (QPS 5, burst 10 per API resource)"
	switch {
	case o.qps < 0:
		limit = "no client-side rate limit"
	case o.qps > 0 || o.burst > 0:
		limit = fmt.Sprintf("rate limit QPS %g, burst %d per API resource", o.qps, o.burst)
		if o.qps == 0 {
			limit = fmt.Sprintf("rate limit QPS 5 (default), burst %d per API resource", o.burst)
		}
	}
	where := "controller in the benchmark process"
	if o.separate {
		where = "controller in a process of its own"
	}
	return fmt.Sprintf("%s, concurrency %d, %s", where, o.concurrency, limit)
}

const maxLoggedErrors = 20

var loggedErrors atomic.Int64

// errorSink is a logr sink that prints errors only.
type errorSink struct{ name string }

func (errorSink) Init(logr.RuntimeInfo)    {}
func (errorSink) Enabled(level int) bool   { return false }
func (errorSink) Info(int, string, ...any) {}
func (s errorSink) Error(err error, msg string, kv ...any) {
	switch n := loggedErrors.Add(1); {
	case n <= maxLoggedErrors:
		fmt.Fprintf(os.Stderr, "ERROR %s%s: %v %v\n", s.name, msg, err, kv)
	case n == maxLoggedErrors+1:
		fmt.Fprintf(os.Stderr, "(further errors not shown)\n")
	}
}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(name string) logr.LogSink {
	return errorSink{name: s.name + name + ": "}
}
