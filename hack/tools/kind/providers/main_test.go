package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// The images `make e2e` builds from the managers of hack/providers.mk, by
// clusterctl's provider label (cluster.x-k8s.io/provider).
var wantImages = map[string]string{
	"cluster-api":             "knest.local/cluster-api-controller:v1.13.6",
	"bootstrap-kubeadm":       "knest.local/kubeadm-bootstrap-controller:v1.13.6",
	"control-plane-kubeadm":   "knest.local/kubeadm-control-plane-controller:v1.13.6",
	"infrastructure-kubevirt": "knest.local/capk-manager:v0.11.2",
}

// clusterctl's namespaces.
var wantNamespaces = map[string]string{
	"cluster-api":             "capi-system",
	"bootstrap-kubeadm":       "capi-kubeadm-bootstrap-system",
	"control-plane-kubeadm":   "capi-kubeadm-control-plane-system",
	"infrastructure-kubevirt": "capk-system",
}

// The manager flags clusterctl's defaults give (the same as e2e/providers passes
// to the managers it runs as processes).
var wantArgs = map[string][]string{
	"cluster-api": {"--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=false,MachineSetPreflightChecks=true," +
		"MachineWaitForVolumeDetachConsiderVolumeAttachments=true,PriorityQueue=true,ReconcilerRateLimiting=true," +
		"InPlaceUpdates=false,MachineTaintPropagation=false"},
	"bootstrap-kubeadm": {"--bootstrap-token-ttl=15m",
		"--feature-gates=MachinePool=true,KubeadmBootstrapFormatIgnition=false,PriorityQueue=true,ReconcilerRateLimiting=true"},
	"control-plane-kubeadm": {"--feature-gates=MachinePool=true,ClusterTopology=false,KubeadmBootstrapFormatIgnition=false,PriorityQueue=true," +
		"ReconcilerRateLimiting=true,InPlaceUpdates=false,MachineTaintPropagation=false"},
	"infrastructure-kubevirt": {"--feature-gates=MachinePool=false"},
}

const servingCertDir = "/tmp/k8s-webhook-server/serving-certs"

var (
	generateOnce sync.Once
	generatedDir string
	generateErr  error
)

// generated runs the command once per test binary and returns its output directory.
func generated(t *testing.T) string {
	t.Helper()
	generateOnce.Do(func() {
		generatedDir, generateErr = os.MkdirTemp("", "knest-kind-providers-")
		if generateErr == nil {
			generateErr = run(context.Background(), generatedDir, defaultRegistry)
		}
	})
	if generateErr != nil {
		t.Fatal(generateErr)
	}
	return generatedDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if generatedDir != "" {
		_ = os.RemoveAll(generatedDir)
	}
	os.Exit(code)
}

func readObjs(t *testing.T, path string) ([]unstructured.Unstructured, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := fromYAML(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs, b
}

func TestComponents(t *testing.T) {
	dir := generated(t)
	all, raw := readObjs(t, filepath.Join(dir, componentsFile))
	if bytes.Contains(raw, []byte("${")) {
		t.Errorf("a ${VAR} is left unsubstituted")
	}
	if bytes.Contains(raw, []byte(injectCAAnnotation)) {
		t.Errorf("%s is left", injectCAAnnotation)
	}
	if len(all) == 0 || all[0].GetKind() != "CustomResourceDefinition" || all[0].GetName() != "providers.clusterctl.cluster.x-k8s.io" {
		t.Fatal("the first object is not clusterctl's inventory CRD")
	}
	// Each provider's objects, contiguous and in clusterctl's install order.
	var order []string
	byProvider := map[string][]unstructured.Unstructured{}
	for _, o := range all[1:] {
		p := o.GetLabels()["cluster.x-k8s.io/provider"]
		if len(order) == 0 || order[len(order)-1] != p {
			order = append(order, p)
		}
		byProvider[p] = append(byProvider[p], o)
	}
	if want := []string{"cluster-api", "bootstrap-kubeadm", "control-plane-kubeadm", "infrastructure-kubevirt"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("providers in order %v, want %v (each contiguous)", order, want)
	}
	for provider, objs := range byProvider {
		t.Run(provider, func(t *testing.T) {
			ns := wantNamespaces[provider]
			if objs[0].GetKind() != "Namespace" || objs[0].GetName() != ns {
				t.Fatalf("the first object is not Namespace %s", ns)
			}
			deployments := 0
			for _, o := range objs {
				id := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
				if o.GroupVersionKind().Group == certManagerGroup {
					t.Errorf("%s: cert-manager object", id)
				}
				if !labels.Set(o.GetLabels()).Has("clusterctl.cluster.x-k8s.io") || o.GetLabels()["clusterctl.cluster.x-k8s.io"] != "" {
					t.Errorf("%s: labels %v lack clusterctl's", id, o.GetLabels())
				}
				if o.GetNamespace() != "" && o.GetNamespace() != ns {
					t.Errorf("%s: not in namespace %s", id, ns)
				}
				if o.GetKind() == "Deployment" {
					deployments++
					checkDeployment(t, o, wantImages[provider], wantArgs[provider])
				}
			}
			if deployments != 1 {
				t.Errorf("%d Deployments, want 1", deployments)
			}
			checkWebhooks(t, objs)
		})
	}
}

func checkDeployment(t *testing.T, d unstructured.Unstructured, image string, args []string) {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	inits, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "initContainers")
	if len(containers) != 1 || len(inits) != 0 {
		t.Fatalf("Deployment %s: %d containers and %d init containers, want only the manager", d.GetName(), len(containers), len(inits))
	}
	c := containers[0].(map[string]any)
	if c["image"] != image || c["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("Deployment %s: image %v (pull policy %v), want %s (IfNotPresent)", d.GetName(), c["image"], c["imagePullPolicy"], image)
	}
	if cmd, _, _ := unstructured.NestedStringSlice(c, "command"); len(cmd) != 1 || cmd[0] != "/manager" {
		t.Errorf("Deployment %s: command %v, want /manager (where the image has the binary)", d.GetName(), cmd)
	}
	got, _, _ := unstructured.NestedStringSlice(c, "args")
	for _, a := range args {
		if !contains(got, a) {
			t.Errorf("Deployment %s: args %v lack %s", d.GetName(), got, a)
		}
	}
}

// checkWebhooks checks that every webhook and conversion webhook calls a Service of
// these components whose Pods serve a certificate, from the Secret they mount, that
// the webhook's caBundle verifies for the Service's DNS names.
func checkWebhooks(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	type clientConfig struct {
		owner    string
		service  map[string]any
		caBundle string
	}
	var ccs []clientConfig
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			webhooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			if len(webhooks) == 0 {
				t.Errorf("%s %s has no webhooks", o.GetKind(), o.GetName())
			}
			for _, w := range webhooks {
				wm := w.(map[string]any)
				svc, _, _ := unstructured.NestedMap(wm, "clientConfig", "service")
				ca, _, _ := unstructured.NestedString(wm, "clientConfig", "caBundle")
				ccs = append(ccs, clientConfig{owner: o.GetKind() + " " + o.GetName() + " webhook " + wm["name"].(string), service: svc, caBundle: ca})
			}
		case "CustomResourceDefinition":
			if s, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); s != "Webhook" {
				continue
			}
			svc, _, _ := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook", "clientConfig", "service")
			ca, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			ccs = append(ccs, clientConfig{owner: "CRD " + o.GetName() + " conversion", service: svc, caBundle: ca})
		}
	}
	if len(ccs) == 0 {
		t.Fatal("no webhooks")
	}
	for _, cc := range ccs {
		if cc.service == nil {
			t.Errorf("%s: no service", cc.owner)
			continue
		}
		name, ns := cc.service["name"].(string), cc.service["namespace"].(string)
		ca, err := base64.StdEncoding.DecodeString(cc.caBundle)
		if err != nil || len(ca) == 0 {
			t.Errorf("%s: no caBundle (%v)", cc.owner, err)
			continue
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			t.Errorf("%s: caBundle holds no PEM certificate", cc.owner)
			continue
		}
		secret, err := servingSecret(objs, ns, name)
		if err != nil {
			t.Errorf("%s: %v", cc.owner, err)
			continue
		}
		crtPEM, keyPEM := secretData(t, secret, "tls.crt"), secretData(t, secret, "tls.key")
		pair, err := tls.X509KeyPair(crtPEM, keyPEM)
		if err != nil {
			t.Errorf("%s: Secret %s: %v", cc.owner, secret.GetName(), err)
			continue
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, dns := range []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"} {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dns, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s: the certificate of Secret %s does not verify for %s with the caBundle: %v", cc.owner, secret.GetName(), dns, err)
			}
		}
	}
}

// servingSecret returns the Secret that the Pods behind Service ns/name mount as
// their webhook serving certificate, checking the Service reaches their webhook port.
func servingSecret(objs []unstructured.Unstructured, ns, name string) (*unstructured.Unstructured, error) {
	svc := find(objs, "Service", ns, name)
	if svc == nil {
		return nil, fmt.Errorf("no Service %s/%s", ns, name)
	}
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(selector) == 0 || len(ports) != 1 {
		return nil, fmt.Errorf("Service %s: selector %v, %d ports", name, selector, len(ports))
	}
	targetPort := ports[0].(map[string]any)["targetPort"]
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetNamespace() != ns {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		ports, _, _ := unstructured.NestedSlice(c, "ports")
		served := false
		for _, p := range ports {
			pm := p.(map[string]any)
			if pm["containerPort"] == targetPort || pm["name"] == targetPort {
				served = true
			}
		}
		if !served {
			return nil, fmt.Errorf("Deployment %s exposes no port %v (Service %s targetPort)", o.GetName(), targetPort, name)
		}
		var volume string
		mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
		for _, m := range mounts {
			if mm := m.(map[string]any); mm["mountPath"] == servingCertDir {
				volume, _ = mm["name"].(string)
			}
		}
		volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			vm := v.(map[string]any)
			if vm["name"] != volume {
				continue
			}
			secretName, _, _ := unstructured.NestedString(vm, "secret", "secretName")
			s := find(objs, "Secret", ns, secretName)
			if s == nil {
				return nil, fmt.Errorf("Deployment %s mounts Secret %s, which is not in the components", o.GetName(), secretName)
			}
			if typ, _, _ := unstructured.NestedString(s.Object, "type"); typ != "kubernetes.io/tls" {
				return nil, fmt.Errorf("Secret %s is of type %s", secretName, typ)
			}
			return s, nil
		}
		return nil, fmt.Errorf("Deployment %s mounts no Secret at %s", o.GetName(), servingCertDir)
	}
	return nil, fmt.Errorf("no Deployment behind Service %s", name)
}

func TestInventory(t *testing.T) {
	dir := generated(t)
	objs, _ := readObjs(t, filepath.Join(dir, inventoryFile))
	want := map[string]string{ // namespace/name: type version
		"capi-system/cluster-api":                                 "CoreProvider v1.13.6",
		"capi-kubeadm-bootstrap-system/bootstrap-kubeadm":         "BootstrapProvider v1.13.6",
		"capi-kubeadm-control-plane-system/control-plane-kubeadm": "ControlPlaneProvider v1.13.6",
		"capk-system/infrastructure-kubevirt":                     "InfrastructureProvider v0.11.2",
	}
	if len(objs) != len(want) {
		t.Fatalf("%d inventory objects, want %d", len(objs), len(want))
	}
	for _, o := range objs {
		key := o.GetNamespace() + "/" + o.GetName()
		typ, _, _ := unstructured.NestedString(o.Object, "type")
		version, _, _ := unstructured.NestedString(o.Object, "version")
		if o.GetKind() != "Provider" || want[key] != typ+" "+version {
			t.Errorf("inventory object %s %s: %s %s, want %q", o.GetKind(), key, typ, version, want[key])
		}
		if l := o.GetLabels(); l["clusterctl.cluster.x-k8s.io/core"] != "inventory" || l["cluster.x-k8s.io/provider"] != o.GetName() {
			t.Errorf("inventory object %s: labels %v", key, l)
		}
	}
}

func find(objs []unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for i := range objs {
		if objs[i].GetKind() == kind && objs[i].GetNamespace() == ns && objs[i].GetName() == name {
			return &objs[i]
		}
	}
	return nil
}

func secretData(t *testing.T, s *unstructured.Unstructured, key string) []byte {
	t.Helper()
	v, _, _ := unstructured.NestedString(s.Object, "data", key)
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) == 0 {
		t.Fatalf("Secret %s: no %s (%v)", s.GetName(), key, err)
	}
	return b
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
