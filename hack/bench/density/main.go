// Command density measures how many hosted tenants one host holds: it creates hosted
// NestedClusters (no workers) on a real host cluster in steps, N at a time, and after
// each step reports how long they took to become Ready, what each costs at rest (CPU
// and memory read from the kubelets' resource metrics, not from requests), what the
// host has left, what knest's controller and Cluster API cost, and the latency of a
// GET to every tenant's API server while all run.
//
// It needs a host with knest, Cluster API and CAPK installed (make kind-up), reached
// through KUBECONFIG; `make bench-density` brings up the kind host and runs it.
// docs/benchmark.md explains the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knest-dev/knest/pkg/knest"
)

type options struct {
	n          int
	steps      []int
	prefix     string
	members    int
	version    string
	rest       time.Duration
	window     time.Duration
	probeEvery time.Duration
	timeout    time.Duration
	stack      []string
	out        string
	keep       bool
}

func main() {
	o := options{}
	var steps, stack string
	flag.IntVar(&o.n, "n", 20, "Tenants at the last step")
	flag.StringVar(&steps, "steps", "1,5,10", "Comma-separated tenant counts measured before -n (each step creates the difference at once)")
	flag.StringVar(&o.prefix, "prefix", "density", "Tenant namespaces are PREFIX-01, PREFIX-02, ...; each holds one NestedCluster")
	flag.IntVar(&o.members, "etcd-members", 1, "etcd members of each tenant")
	flag.StringVar(&o.version, "version", "", "Kubernetes version of the tenants (default: the API's default)")
	flag.DurationVar(&o.rest, "rest", 60*time.Second, "Wait after the step's tenants are Ready before measuring at rest")
	flag.DurationVar(&o.window, "window", 60*time.Second, "Window over which CPU use is measured, and tenant GETs are timed")
	flag.DurationVar(&o.probeEvery, "probe-every", time.Second, "Interval of each tenant's GETs during the window")
	flag.DurationVar(&o.timeout, "timeout", 40*time.Minute, "Give up on a step whose tenants are not all Ready after this long")
	flag.StringVar(&stack, "stack", "knest-system,capi-system,capi-kubeadm-bootstrap-system,capi-kubeadm-control-plane-system,capk-system,kubevirt",
		"Namespaces of the shared management stack reported beside the tenants (the first is knest's controller)")
	flag.StringVar(&o.out, "out", "", "Also write the report as markdown to this file, and the raw results as JSON next to it")
	flag.BoolVar(&o.keep, "keep", false, "Keep the tenants at the end (default: delete them and wait until they are gone)")
	flag.Parse()
	var err error
	if o.steps, err = parseSteps(steps, o.n); err != nil {
		fail(err)
	}
	o.stack = strings.Split(stack, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "density:", err)
	os.Exit(1)
}

// parseSteps returns the ascending tenant counts to measure, ending at n.
func parseSteps(s string, n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("-n %d: at least one tenant", n)
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-steps: %q is not a positive count", f)
		}
		if v < n {
			out = append(out, v)
		}
	}
	out = append(out, n)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("host cluster: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kc, err := knest.NewClientForConfig(cfg, knest.WithPollInterval(5*time.Second))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &bench{o: o, kc: kc, cs: cs}
	if !o.keep {
		defer func() {
			// The signal context may be done: deleting gets its own.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			if err := b.deleteAll(dctx); err != nil {
				fmt.Fprintln(os.Stderr, "density: deleting the tenants:", err)
			}
		}()
	}

	res := results{Started: time.Now().UTC(), Options: o.String()}
	if res.Host, err = b.hostInfo(ctx); err != nil {
		return err
	}
	base, err := b.measure(ctx, 0)
	if err != nil {
		return err
	}
	res.Steps = append(res.Steps, base)
	printStep(os.Stdout, base)
	for _, n := range o.steps {
		st, err := b.step(ctx, n)
		if err != nil {
			return err
		}
		res.Steps = append(res.Steps, st)
		printStep(os.Stdout, st)
	}
	report := renderReport(res)
	fmt.Print("\n" + report)
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(o.out, ".md")+".json", raw, 0o644)
}

func (o options) String() string {
	return fmt.Sprintf("-n %d -steps %s -etcd-members %d -rest %s -window %s -probe-every %s",
		o.n, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(o.steps)), ","), "[]"), o.members, o.rest, o.window, o.probeEvery)
}
