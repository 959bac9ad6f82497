package main

import (
	"bytes"
	"strings"
	"testing"
)

// Lines as a VM's serial console has them, and as node-image-test's (which
// prefixes the host's time) has them.
const guestConsole = `[    1.000000] Linux version 6.1.0
[   21.638393] cloud-init[346]: Cloud-init v. 22.4.2 running 'init-local' at Sun, 22 Nov 2026 21:04:45 +0000. Up 21.41 seconds.
[   49.803981] cloud-init[456]: [preflight] Running pre-flight checks
[   80.000000] cloud-init[456]: [preflight] Running pre-flight checks
[  145.546279] cloud-init[456]: [control-plane-check] kube-apiserver is healthy after 1m22.09465539s
[  163.392247] cloud-init[456]: Your Kubernetes control-plane has initialized successfully!
`

const nodetestConsole = `[   68.10] [   66.029184] cloud-init[300]: Cloud-init v. 22.4.2 running 'init-local' at Sun. Up 66.0 seconds.
[  137.19] [  135.023259] cloud-init[442]: [preflight] Running pre-flight checks
[  435.93] [  433.754848] cloud-init[442]: This node has joined the cluster:
`

func TestParseTakesTheFirstMarkerAndTheGuestClock(t *testing.T) {
	cp, err := parse("cp", strings.NewReader(guestConsole))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"cloud-init": 21.638393, "kubeadm": 49.803981, "api-healthy": 145.546279, "init-done": 163.392247}
	for k, v := range want {
		if cp.at[k] != v {
			t.Errorf("%s = %v, want %v", k, cp.at[k], v)
		}
	}
	if cp.role() != "control plane" {
		t.Errorf("role %q", cp.role())
	}
	w, _ := parse("w", strings.NewReader(nodetestConsole))
	if w.at["kubeadm"] != 135.023259 || w.at["join-done"] != 433.754848 || w.role() != "worker" {
		t.Errorf("worker: %v, role %q", w.at, w.role())
	}
	if b, _ := parse("x", strings.NewReader("[    1.000000] Linux\n")); b.role() != "incomplete" {
		t.Errorf("a boot without kubeadm's end: role %q", b.role())
	}
}

func TestReportMedians(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
	boots := []boot{
		{name: "a", at: map[string]float64{"kubeadm": 50, "init-done": 170}},
		{name: "b", at: map[string]float64{"kubeadm": 60, "init-done": 230}},
		{name: "c", at: map[string]float64{"kubeadm": 49, "init-done": 160}},
	}
	var out bytes.Buffer
	report(&out, boots)
	if !strings.Contains(out.String(), "| **median of 3** | control plane | — | 50 | — | 170 | — |") {
		t.Errorf("report:\n%s", out.String())
	}
}
