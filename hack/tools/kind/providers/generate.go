package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	// Linked in only so that CAPK is in this binary's build information (modules
	// reads the module versions there) and go mod tidy keeps its requirement.
	_ "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/repository"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	clusterctlmanifests "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	capiModule = "sigs.k8s.io/cluster-api"
	capkModule = "sigs.k8s.io/cluster-api-provider-kubevirt"

	defaultRegistry = "knest.local"

	// Output files in -out.
	componentsFile = "components.yaml"
	inventoryFile  = "inventory.yaml"
	caFile         = "ca.crt"

	injectCAAnnotation = "cert-manager.io/inject-ca-from"
	certManagerGroup   = "cert-manager.io"
)

// provider is one clusterctl provider and where its components come from.
type provider struct {
	// name and typ are clusterctl's (`clusterctl init --bootstrap kubeadm`...);
	// clusterctlv1.ManifestLabel(name, typ) is the cluster.x-k8s.io/provider label.
	name string
	typ  clusterctlv1.ProviderType
	// url is the components URL of clusterctl's built-in provider list; clusterctl
	// keeps it in its configuration only.
	url    string
	module string
	// kustomization is the directory inside the module that the release
	// components YAML is built from.
	kustomization string
	// image is the manager image name under the registry; its tag is the module version.
	image string
}

// providers in the order clusterctl installs them (core, bootstrap, control plane,
// infrastructure).
var providers = []provider{
	{
		name: config.ClusterAPIProviderName, typ: clusterctlv1.CoreProviderType,
		url:    "https://github.com/kubernetes-sigs/cluster-api/releases/latest/core-components.yaml",
		module: capiModule, kustomization: "config/default",
		image: "cluster-api-controller",
	},
	{
		name: config.KubeadmBootstrapProviderName, typ: clusterctlv1.BootstrapProviderType,
		url:    "https://github.com/kubernetes-sigs/cluster-api/releases/latest/bootstrap-components.yaml",
		module: capiModule, kustomization: "bootstrap/kubeadm/config/default",
		image: "kubeadm-bootstrap-controller",
	},
	{
		name: config.KubeadmControlPlaneProviderName, typ: clusterctlv1.ControlPlaneProviderType,
		url:    "https://github.com/kubernetes-sigs/cluster-api/releases/latest/control-plane-components.yaml",
		module: capiModule, kustomization: "controlplane/kubeadm/config/default",
		image: "kubeadm-control-plane-controller",
	},
	{
		name: config.KubevirtProviderName, typ: clusterctlv1.InfrastructureProviderType,
		url:    "https://github.com/kubernetes-sigs/cluster-api-provider-kubevirt/releases/latest/infrastructure-components.yaml",
		module: capkModule, kustomization: "config/default",
		image: "capk-manager",
	},
}

// run writes the components of every provider and the inventory into out.
func run(ctx context.Context, out, registry string) error {
	mods, err := modules()
	if err != nil {
		return err
	}
	ca, err := newCA()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// clusterctl installs its inventory CRD first, then the providers in order.
	components := append([]byte{}, clusterctlmanifests.ClusterctlAPIManifest...)
	var inventory []unstructured.Unstructured
	for _, p := range providers {
		mod := mods[p.module]
		objs, inv, err := build(ctx, p, mod, registry, ca)
		if err != nil {
			return fmt.Errorf("%s (%s %s): %w", clusterctlv1.ManifestLabel(p.name, p.typ), p.module, mod.version, err)
		}
		b, err := toYAML(objs)
		if err != nil {
			return err
		}
		components = appendDoc(components, b)
		inventory = append(inventory, inv)
	}
	if err := writeFile(filepath.Join(out, componentsFile), components); err != nil {
		return err
	}
	b, err := toYAML(inventory)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, inventoryFile), b); err != nil {
		return err
	}
	return writeFile(filepath.Join(out, caFile), ca.certPEM)
}

// appendDoc appends the YAML documents b to the YAML documents a.
func appendDoc(a, b []byte) []byte {
	if len(a) > 0 {
		if a[len(a)-1] != '\n' {
			a = append(a, '\n')
		}
		a = append(a, "---\n"...)
	}
	return append(a, b...)
}

// build returns the objects to install for p and its clusterctl inventory entry.
func build(ctx context.Context, p provider, mod module, registry string, ca *authority) ([]unstructured.Unstructured, unstructured.Unstructured, error) {
	raw, err := kustomize(filepath.Join(mod.dir, p.kustomization))
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}
	raw, err = setImages(raw, fmt.Sprintf("%s/%s:%s", registry, p.image, mod.version))
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}

	// clusterctl with an empty configuration: only the defaults of ${VAR:=default}.
	cfg, err := config.New(ctx, "", config.InjectReader(config.NewMemoryReader()))
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}
	comps, err := repository.NewComponents(repository.ComponentsInput{
		Provider:     config.NewProvider(p.name, p.url, p.typ),
		ConfigClient: cfg,
		Processor:    yamlprocessor.NewSimpleProcessor(),
		RawYaml:      raw,
		Options:      repository.ComponentsOptions{Version: mod.version},
	})
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}

	objs, err := replaceCertManager(comps.Objs(), ca, map[string]string{
		clusterctlv1.ClusterctlLabel: "",
		// clusterv1.ProviderNameLabel; its package pulls in much more than this one.
		"cluster.x-k8s.io/provider": comps.ManifestLabel(),
	})
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}
	if err := checkImages(objs, registry+"/"); err != nil {
		return nil, unstructured.Unstructured{}, err
	}

	invObj := comps.InventoryObject()
	inv, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&invObj)
	if err != nil {
		return nil, unstructured.Unstructured{}, err
	}
	unstructured.RemoveNestedField(inv, "metadata", "creationTimestamp")
	return objs, unstructured.Unstructured{Object: inv}, nil
}

// kustomize builds the kustomization in dir, as `kustomize build dir` does.
func kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// setImages sets the image of every container named manager in every Deployment
// of the raw components, with imagePullPolicy IfNotPresent. Anything else is left
// to checkImages, so no image is ever pulled from outside.
func setImages(raw []byte, image string) ([]byte, error) {
	objs, err := fromYAML(raw)
	if err != nil {
		return nil, err
	}
	found := false
	for i := range objs {
		if objs[i].GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(objs[i].Object, "spec", "template", "spec", "containers")
		if err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", objs[i].GetName(), err)
		}
		for j, c := range containers {
			cm, ok := c.(map[string]any)
			if !ok || cm["name"] != "manager" {
				continue
			}
			cm["image"] = image
			cm["imagePullPolicy"] = "IfNotPresent"
			containers[j] = cm
			found = true
		}
		if err := unstructured.SetNestedSlice(objs[i].Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, errors.New("no Deployment with a container named manager")
	}
	return toYAML(objs)
}

// checkImages fails unless every container of every Deployment runs an image of
// the given prefix with imagePullPolicy IfNotPresent.
func checkImages(objs []unstructured.Unstructured, prefix string) error {
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		for _, field := range []string{"initContainers", "containers"} {
			containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			if err != nil {
				return err
			}
			for _, c := range containers {
				cm, _ := c.(map[string]any)
				if img, _ := cm["image"].(string); !strings.HasPrefix(img, prefix) || cm["imagePullPolicy"] != "IfNotPresent" {
					return fmt.Errorf("Deployment %s/%s: container %v runs image %q (pull policy %v), not one of %s*",
						o.GetNamespace(), o.GetName(), cm["name"], img, cm["imagePullPolicy"], prefix)
				}
			}
		}
	}
	return nil
}

// replaceCertManager removes the cert-manager objects and does what cert-manager
// and its cainjector would do with them: a Secret per Certificate, and the CA as
// caBundle wherever cert-manager.io/inject-ca-from asks for it. The Secrets get
// labels and come right after the Namespace objects.
func replaceCertManager(objs []unstructured.Unstructured, ca *authority, labels map[string]string) ([]unstructured.Unstructured, error) {
	certs := map[string]unstructured.Unstructured{}
	var rest []unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group != certManagerGroup {
			rest = append(rest, o)
			continue
		}
		switch o.GetKind() {
		case "Certificate":
			certs[o.GetNamespace()+"/"+o.GetName()] = o
		case "Issuer":
			// Only the self-signed issuers of the Certificates are expected.
			if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "selfSigned"); !ok {
				return nil, fmt.Errorf("Issuer %s/%s is not self-signed", o.GetNamespace(), o.GetName())
			}
		default:
			return nil, fmt.Errorf("unexpected cert-manager object %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("no cert-manager Certificate")
	}

	var secrets []unstructured.Unstructured
	for _, c := range certs {
		secretName, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		dnsNames, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		if secretName == "" || len(dnsNames) == 0 {
			return nil, fmt.Errorf("Certificate %s/%s has no secretName or no dnsNames", c.GetNamespace(), c.GetName())
		}
		certPEM, keyPEM, err := ca.issue(dnsNames)
		if err != nil {
			return nil, err
		}
		s := unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata":   map[string]any{"name": secretName, "namespace": c.GetNamespace()},
			"type":       "kubernetes.io/tls",
			"data": map[string]any{
				"ca.crt":  base64.StdEncoding.EncodeToString(ca.certPEM),
				"tls.crt": base64.StdEncoding.EncodeToString(certPEM),
				"tls.key": base64.StdEncoding.EncodeToString(keyPEM),
			},
		}}
		s.SetLabels(copyMap(labels))
		secrets = append(secrets, s)
	}
	if err := checkSecretsMounted(rest, secrets); err != nil {
		return nil, err
	}

	caBundle := base64.StdEncoding.EncodeToString(ca.certPEM)
	for i := range rest {
		o := &rest[i]
		ann := o.GetAnnotations()
		from, ok := ann[injectCAAnnotation]
		if ok {
			if _, known := certs[from]; !known {
				return nil, fmt.Errorf("%s %s: %s=%s names no Certificate of these components", o.GetKind(), o.GetName(), injectCAAnnotation, from)
			}
			delete(ann, injectCAAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			o.SetAnnotations(ann)
		}
		var err error
		switch o.GetKind() {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			err = injectWebhooks(o, ok, caBundle)
		case "CustomResourceDefinition":
			err = injectConversion(o, ok, caBundle)
		}
		if err != nil {
			return nil, err
		}
	}

	// clusterctl's order: Namespaces first (then, where cert-manager objects were,
	// the Secrets), then everything else as built.
	n := 0
	for n < len(rest) && rest[n].GetKind() == "Namespace" {
		n++
	}
	out := append([]unstructured.Unstructured{}, rest[:n]...)
	out = append(out, secrets...)
	return append(out, rest[n:]...), nil
}

// injectWebhooks sets caBundle on every webhook of a webhook configuration, as the
// cainjector does for an annotated one. Not annotated, every webhook must call a URL
// or have a caBundle already (none of these components has such a webhook).
func injectWebhooks(o *unstructured.Unstructured, inject bool, caBundle string) error {
	webhooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	for i, w := range webhooks {
		wm, _ := w.(map[string]any)
		cc, _ := wm["clientConfig"].(map[string]any)
		if cc == nil {
			return fmt.Errorf("%s %s: webhook %v has no clientConfig", o.GetKind(), o.GetName(), wm["name"])
		}
		if inject {
			cc["caBundle"] = caBundle
		} else if cc["service"] != nil && cc["caBundle"] == nil {
			return fmt.Errorf("%s %s: webhook %v calls a Service but is not annotated %s", o.GetKind(), o.GetName(), wm["name"], injectCAAnnotation)
		}
		webhooks[i] = wm
	}
	return unstructured.SetNestedSlice(o.Object, webhooks, "webhooks")
}

// injectConversion sets caBundle on a CRD's conversion webhook, if it has one, as
// the cainjector does for an annotated CRD.
func injectConversion(o *unstructured.Unstructured, inject bool, caBundle string) error {
	cc, ok, err := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook", "clientConfig")
	if err != nil {
		return fmt.Errorf("CRD %s: %w", o.GetName(), err)
	}
	if !ok {
		return nil
	}
	if !inject {
		if cc["service"] != nil && cc["caBundle"] == nil {
			return fmt.Errorf("CRD %s: conversion webhook calls a Service but the CRD is not annotated %s", o.GetName(), injectCAAnnotation)
		}
		return nil
	}
	return unstructured.SetNestedField(o.Object, caBundle, "spec", "conversion", "webhook", "clientConfig", "caBundle")
}

// checkSecretsMounted fails unless every secret volume of every Deployment names
// one of the serving certificate Secrets and every such Secret is mounted.
func checkSecretsMounted(objs, secrets []unstructured.Unstructured) error {
	made := map[string]bool{}
	for _, s := range secrets {
		made[s.GetNamespace()+"/"+s.GetName()] = false
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
			if !ok {
				continue
			}
			key := o.GetNamespace() + "/" + name
			if _, known := made[key]; !known {
				return fmt.Errorf("Deployment %s/%s mounts Secret %s, which no Certificate makes", o.GetNamespace(), o.GetName(), name)
			}
			made[key] = true
		}
	}
	for k, mounted := range made {
		if !mounted {
			return fmt.Errorf("no Deployment mounts the serving certificate Secret %s", k)
		}
	}
	return nil
}

// module is a module of the build list and its directory in the module cache.
type module struct {
	version string
	dir     string
}

// modules locates CAPI's and CAPK's modules at the versions this command was built
// with: the config/ directories are read at exactly the pinned versions.
func modules() (map[string]module, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, errors.New("no build information in this binary")
	}
	cmd := exec.Command("go", "env", "GOMODCACHE")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %w: %s", err, stderr.String())
	}
	cache := strings.TrimSpace(string(b))
	out := map[string]module{}
	for _, d := range bi.Deps {
		if d.Path != capiModule && d.Path != capkModule {
			continue
		}
		if d.Replace != nil {
			return nil, fmt.Errorf("module %s is replaced; this command reads it from the module cache", d.Path)
		}
		dir := filepath.Join(cache, escapePath(d.Path)+"@"+d.Version)
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("module %s %s is not in the module cache: %w (run `go mod download %s`)", d.Path, d.Version, err, d.Path)
		}
		out[d.Path] = module{version: d.Version, dir: dir}
	}
	for _, m := range []string{capiModule, capkModule} {
		if _, ok := out[m]; !ok {
			return nil, fmt.Errorf("module %s is not in this binary's build information", m)
		}
	}
	return out, nil
}

// escapePath is golang.org/x/mod/module.EscapePath for valid module paths: an
// upper-case letter becomes ! and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func fromYAML(b []byte) ([]unstructured.Unstructured, error) {
	return utilyaml.ToUnstructured(b)
}

// toYAML writes objs as clusterctl does (Components.Yaml), newline-terminated.
func toYAML(objs []unstructured.Unstructured) ([]byte, error) {
	b, err := utilyaml.FromUnstructured(objs)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return b, nil
}

func writeFile(path string, b []byte) error {
	return os.WriteFile(path, b, 0o644)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
