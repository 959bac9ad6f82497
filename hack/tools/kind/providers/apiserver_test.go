package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// envTestBin names the directory of the test bed's etcd and kube-apiserver
// (`make testbin`; `eval "$(make -s testbin-env)"` sets it), as for internal/testenv.
const envTestBin = "KNEST_TESTBIN"

// TestApply installs the output with kubectl the way `make e2e` does, on a
// bare kube-apiserver (no controllers, so nothing runs): every object must be valid
// for a real API server, server-side apply must take the files in order as they are,
// and applying them again must change nothing and conflict with nothing.
func TestApply(t *testing.T) {
	const hint = "run `make testbin` and `eval \"$(make -s testbin-env)\"` before `go test`"
	bin := os.Getenv(envTestBin)
	if bin == "" {
		t.Fatalf("%s is not set: %s", envTestBin, hint)
	}
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	if _, err := exec.LookPath(kubectl); err != nil {
		t.Fatalf("no kubectl (set KUBECTL): %v", err)
	}
	dir := generated(t)

	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.GetAPIServer().Path = filepath.Join(bin, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(bin, "etcd")}
	if _, err := env.Start(); err != nil {
		t.Fatalf("failed to start etcd and kube-apiserver from %s: %v (%s)", bin, err, hint)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	k := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}

	components := filepath.Join(dir, componentsFile)
	inventory := filepath.Join(dir, inventoryFile)
	k("apply", "--server-side", "-f", components)
	k("wait", "--for=condition=Established", "--timeout=2m", "crd", "--all")
	k("apply", "--server-side", "-f", inventory)

	// Applied again, nothing changes (no resourceVersion moves): one field manager,
	// no conflicts, nothing the API server changes that the next apply would undo.
	const kinds = "namespaces,secrets,serviceaccounts,services,deployments,roles,rolebindings,clusterroles,clusterrolebindings," +
		"customresourcedefinitions,validatingwebhookconfigurations,mutatingwebhookconfigurations,providers.clusterctl.cluster.x-k8s.io"
	versions := func() string {
		return k("get", kinds, "-A", "-o", `jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}`)
	}
	before := versions()
	if n := strings.Count(before, "\n"); n < 50 {
		t.Fatalf("only %d objects found:\n%s", n, before)
	}
	k("apply", "--server-side", "-f", components)
	k("apply", "--server-side", "-f", inventory)
	if after := versions(); after != before {
		t.Errorf("applying again changed objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	ca, err := os.ReadFile(filepath.Join(dir, caFile))
	if err != nil {
		t.Fatal(err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)

	// What the API server stored is what the managers and the API server will use.
	for _, ns := range wantNamespaces {
		if got := k("get", "deployments", "-n", ns, "-o", "jsonpath={.items[*].spec.template.spec.containers[*].image}"); !strings.HasPrefix(got, defaultRegistry+"/") {
			t.Errorf("namespace %s: Deployments run %q", ns, got)
		}
		if got := k("get", "secrets", "-n", ns, "--field-selector=type=kubernetes.io/tls", "-o", "name"); strings.Count(got, "\n") != 1 {
			t.Errorf("namespace %s: TLS Secrets %q, want one", ns, got)
		}
	}
	crds := k("get", "crd", "-o", `jsonpath={range .items[?(@.spec.conversion.strategy=="Webhook")]}{.metadata.name} {.spec.conversion.webhook.clientConfig.caBundle}{"\n"}{end}`)
	if n := strings.Count(crds, "\n"); n < 10 {
		t.Errorf("%d CRDs with a conversion webhook, want CAPI's (13)", n)
	}
	for _, line := range strings.Split(strings.TrimSpace(crds), "\n") {
		if f := strings.Fields(line); len(f) != 2 || f[1] != caBundle {
			t.Errorf("CRD %s: conversion caBundle is not the CA", f[0])
		}
	}
	for _, kind := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		got := k("get", kind, "-o", `jsonpath={range .items[*].webhooks[*]}{.name} {.clientConfig.caBundle}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
			if f := strings.Fields(line); len(f) != 2 || f[1] != caBundle {
				t.Errorf("%s: webhook %s: caBundle is not the CA", kind, f[0])
			}
		}
	}
	if got := k("get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o", "name"); strings.Count(got, "\n") != len(providers) {
		t.Errorf("inventory: %q", got)
	}
	fmt.Fprint(os.Stderr, k("get", "deployments,services,secrets", "-A", "-l", "clusterctl.cluster.x-k8s.io"))
}
