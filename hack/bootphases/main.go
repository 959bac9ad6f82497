// Command bootphases reads the serial consoles of node VMs (a KubeVirt VM's, saved
// from its virt-launcher pod's guest-console-log container; node-image-test's
// *.console.log) and prints when each boot reached cloud-init, kubeadm, a healthy API
// server and the end of kubeadm init or join, in seconds of the guest's clock, with
// the median of each phase per role:
//
//	kubectl logs <virt-launcher pod> -c guest-console-log >cp.console.log
//	go run ./hack/bootphases cp.console.log
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// phase is a console line that marks a milestone; the first one counts.
type phase struct{ name, marker string }

var phases = []phase{
	{"cloud-init", "running 'init-local'"},
	{"kubeadm", "[preflight] Running pre-flight checks"},
	{"api-healthy", "kube-apiserver is healthy after"},
	{"init-done", "Your Kubernetes control-plane has initialized successfully"},
	{"join-done", "This node has joined the cluster"},
}

// guestTime is the guest kernel's timestamp (six decimals); node-image-test
// prefixes the host's own (two decimals), which this skips.
var guestTime = regexp.MustCompile(`\[\s*(\d+\.\d{6})\]`)

// boot is one console's milestones in seconds since the guest kernel started.
type boot struct {
	name string
	at   map[string]float64
}

func (b boot) role() string {
	if _, ok := b.at["init-done"]; ok {
		return "control plane"
	}
	if _, ok := b.at["join-done"]; ok {
		return "worker"
	}
	return "incomplete"
}

func parse(name string, r io.Reader) (boot, error) {
	b := boot{name: name, at: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range phases {
			if _, seen := b.at[p.name]; seen || !strings.Contains(line, p.marker) {
				continue
			}
			if m := guestTime.FindStringSubmatch(line); m != nil {
				b.at[p.name], _ = strconv.ParseFloat(m[1], 64)
			}
		}
	}
	return b, sc.Err()
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(w io.Writer, boots []boot) {
	header := "| console | role |"
	rule := "|---|---|"
	for _, p := range phases {
		header += " " + p.name + " |"
		rule += "---:|"
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, rule)
	byRole := map[string][]boot{}
	for _, b := range boots {
		byRole[b.role()] = append(byRole[b.role()], b)
		fmt.Fprintf(w, "| %s | %s |%s\n", b.name, b.role(), cells(median, []boot{b}))
	}
	for _, role := range []string{"control plane", "worker"} {
		if bs := byRole[role]; len(bs) > 0 {
			fmt.Fprintf(w, "| **median of %d** | %s |%s\n", len(bs), role, cells(median, bs))
		}
	}
}

// cells formats one row: agg of each phase's values across boots.
func cells(agg func([]float64) float64, boots []boot) string {
	var row string
	for _, p := range phases {
		var v []float64
		for _, b := range boots {
			if t, ok := b.at[p.name]; ok {
				v = append(v, t)
			}
		}
		if len(v) == 0 {
			row += " — |"
			continue
		}
		row += fmt.Sprintf(" %.0f |", agg(v))
	}
	return row
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: bootphases CONSOLE_LOG...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var boots []boot
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, err := parse(path, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(1)
		}
		boots = append(boots, b)
	}
	report(os.Stdout, boots)
}
