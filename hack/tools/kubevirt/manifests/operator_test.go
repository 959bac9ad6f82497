package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/install"
	operatorutil "kubevirt.io/kubevirt/pkg/virt-operator/util"
	"sigs.k8s.io/yaml"
)

// TestOperatorManifest checks the kubevirt-operator.yaml that `make kubevirt-images`
// writes (hack/kubevirt-images.sh), in $KNEST_KUBEVIRT (eval "$(make -s
// kubevirt-env)"): virt-operator runs from the local image, and KubeVirt's own
// config and install-strategy code, fed that Deployment's env, deploys every
// component from knest.local/kubevirt at the pinned tag, as the KubeVirt CR of
// hack/kind/up.sh asks (imagePullPolicy IfNotPresent).
func TestOperatorManifest(t *testing.T) {
	dir := os.Getenv("KNEST_KUBEVIRT")
	if dir == "" {
		t.Fatal(`KNEST_KUBEVIRT unset: make kubevirt-images-check runs this test`)
	}
	const prefix, version, namespace = "knest.local/kubevirt", "v1.7.0", "kubevirt"
	file := filepath.Join(dir, "images", "kubevirt-operator.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	op := operatorDeployment(t, data)
	if op.Namespace != namespace {
		t.Errorf("virt-operator namespace %q, want %q", op.Namespace, namespace)
	}
	c := op.Spec.Template.Spec.Containers[0]
	if want := prefix + "/virt-operator:" + version; c.Image != want {
		t.Errorf("virt-operator image %q, want %q", c.Image, want)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("virt-operator imagePullPolicy %q, want IfNotPresent", c.ImagePullPolicy)
	}

	env := &operatorutil.EnvVarManagerMock{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			_ = env.Setenv(e.Name, e.Value)
		}
	}
	if v := env.Getenv(operatorutil.KubeVirtVersionEnvName); v != version {
		t.Errorf("%s=%q, want %q", operatorutil.KubeVirtVersionEnvName, v, version)
	}
	if err := operatorutil.VerifyEnvWithEnvVarManager(env); err != nil {
		t.Fatalf("virt-operator rejects its env: %v", err)
	}
	kv := &v1.KubeVirt{}
	kv.Namespace = namespace
	kv.Spec.ImagePullPolicy = corev1.PullIfNotPresent
	config := operatorutil.GetTargetConfigFromKVWithEnvVarManager(kv, env)
	if config.GetKubeVirtVersion() != version {
		t.Errorf("KubeVirt version %q, want %q", config.GetKubeVirtVersion(), version)
	}
	strategy, err := install.GenerateCurrentInstallStrategy(config, "", namespace)
	if err != nil {
		t.Fatal(err)
	}

	var specs []corev1.PodSpec
	for _, d := range strategy.Deployments() {
		specs = append(specs, d.Spec.Template.Spec)
	}
	for _, ds := range strategy.DaemonSets() {
		specs = append(specs, ds.Spec.Template.Spec)
	}
	images := map[string]bool{}
	for _, s := range specs {
		for _, c := range append(s.InitContainers, s.Containers...) {
			images[c.Image] = true
			// Unset (virt-handler's virt-launcher init container) defaults to
			// IfNotPresent for a tag other than latest.
			if c.ImagePullPolicy != corev1.PullIfNotPresent && c.ImagePullPolicy != "" {
				t.Errorf("container %s (%s): imagePullPolicy %q, want IfNotPresent", c.Name, c.Image, c.ImagePullPolicy)
			}
			// virt-controller names the image of every VM's pod by a flag.
			for i, a := range c.Args {
				if strings.HasSuffix(a, "-image") && i+1 < len(c.Args) {
					images[c.Args[i+1]] = true
				}
			}
		}
	}
	// What hack/kubevirt-images.sh builds; the operator's optional components (export
	// proxy and server, synchronization controller, pr-helper, sidecar shim) run only
	// with feature gates knest does not set.
	built := map[string]bool{}
	for _, n := range []string{"virt-api", "virt-controller", "virt-handler", "virt-launcher"} {
		built[prefix+"/"+n+":"+version] = true
		if !images[prefix+"/"+n+":"+version] {
			t.Errorf("the install strategy does not run %s/%s:%s (images: %v)", prefix, n, version, images)
		}
	}
	for img := range images {
		if !strings.HasPrefix(img, prefix+"/") || !strings.HasSuffix(img, ":"+version) {
			t.Errorf("the install strategy refers to %q, not an image of %s at %s", img, prefix, version)
		}
	}
	// Each image that a default install starts must be in the archive.
	for _, d := range strategy.Deployments() {
		if strings.Contains(d.Name, "exportproxy") || strings.Contains(d.Name, "synchronization") {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if !built[c.Image] {
				t.Errorf("deployment %s runs %s, which is not built", d.Name, c.Image)
			}
		}
	}
	for _, ds := range strategy.DaemonSets() {
		for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
			if !built[c.Image] {
				t.Errorf("daemonset %s container %s runs %s, which is not built", ds.Name, c.Name, c.Image)
			}
		}
	}
}

func operatorDeployment(t *testing.T, manifest []byte) *appsv1.Deployment {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(doc, d); err != nil {
			t.Fatal(err)
		}
		if d.Name == "virt-operator" {
			return d
		}
	}
	t.Fatal("no virt-operator Deployment")
	return nil
}
