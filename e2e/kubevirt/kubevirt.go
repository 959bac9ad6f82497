// Package kubevirt runs KubeVirt's own virt-api and virt-controller, built from the
// kubevirt.io/kubevirt module at the pinned version (`make kubevirt`,
// hack/kubevirt.mk), as processes against a running test bed (internal/testenv),
// installed the way virt-operator installs them:
//
//   - every CRD virt-operator installs, from KubeVirt's own generator;
//   - namespace kubevirt with a KubeVirt CR whose spec.configuration the caller
//     chooses (feature gates, permitted host devices), as a host admin would;
//   - virt-api serving its mutating and validating webhooks over TLS with a
//     certificate from a CA made here; virt-operator's webhook configurations with
//     clientConfig.url pointing at the process instead of the virt-api Service;
//   - virt-controller turning VirtualMachines into VirtualMachineInstances and
//     those into virt-launcher pods;
//   - each component as its service account, with the ServiceAccount, roles and
//     bindings virt-operator gives it: it holds no more rights than in a cluster,
//     and virt-api's admission, which lets only KubeVirt's own service accounts
//     change some fields of a VMI, sees the user it expects.
//
// No virt-handler and no kubelet run here: a virt-launcher pod is created and stays
// Pending.
package kubevirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/e2e/internal/webhook"
	"github.com/knest-dev/knest/internal/childproc"
	"github.com/knest-dev/knest/internal/testenv"
)

// EnvKubeVirt names the directory `make kubevirt` builds (bin/, install/);
// `eval "$(make -s kubevirt-env)"` sets it for a manual `go test`.
const EnvKubeVirt = "KNEST_KUBEVIRT"

const (
	// Namespace is where virt-operator installs KubeVirt by default, and where
	// virt-api and virt-controller look for the KubeVirt CR outside a pod.
	Namespace = "kubevirt"
	// LauncherImage is the image virt-controller puts into virt-launcher pods. Nothing
	// pulls it here.
	LauncherImage = "quay.io/kubevirt/virt-launcher:v1.7.0"

	startTimeout = 3 * time.Minute
)

// components in start order: the webhooks must serve before virt-controller writes
// VMIs through them.
var components = []string{"virt-api", "virt-controller"}

// Options configure Start.
type Options struct {
	// LogDir receives virt-api.log and virt-controller.log and is kept. Empty: a
	// temporary directory that Stop removes.
	LogDir string
	// Configuration is the KubeVirt CR's spec.configuration.
	Configuration kubevirtv1.KubeVirtConfiguration
}

// KubeVirt is the running virt-api and virt-controller.
type KubeVirt struct {
	// LogDir holds <component>.log.
	LogDir string

	env       *testenv.Env
	dir       string
	procs     []*childproc.Process
	installed []client.Object
}

// Start installs KubeVirt's CRDs, namespace, KubeVirt CR and webhook configurations
// into env, starts virt-api and virt-controller, and returns once both serve. On
// error nothing is left running or installed but the CRDs.
func Start(ctx context.Context, env *testenv.Env, opts Options) (_ *KubeVirt, retErr error) {
	kvDir, err := componentsDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "knest-kubevirt-")
	if err != nil {
		return nil, err
	}
	k := &KubeVirt{env: env, dir: dir, LogDir: opts.LogDir}
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("%w\n%s", retErr, k.tails(30))
			_ = k.Stop()
		}
	}()
	if k.LogDir == "" {
		k.LogDir = dir
	} else if err := os.MkdirAll(k.LogDir, 0o755); err != nil {
		return nil, err
	}
	install := filepath.Join(kvDir, "install")
	if err := k.installCRDs(ctx, install); err != nil {
		return nil, err
	}

	certDir := filepath.Join(dir, "certs")
	caBundle, err := webhook.WriteServingCert(certDir)
	if err != nil {
		return nil, err
	}
	crt, key := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	kvCR := &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "kubevirt"},
		Spec:       kubevirtv1.KubeVirtSpec{Configuration: opts.Configuration},
	}
	for _, obj := range []client.Object{
		kvCR,
		// virt-operator publishes the CA of KubeVirt's internal certificates here;
		// virt-api trusts client certificates it signed.
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "kubevirt-ca"},
			Data:       map[string]string{"ca-bundle": string(caBundle)},
		},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("failed to create %T %s: %w", obj, obj.GetName(), err)
		}
		k.installed = append(k.installed, obj)
	}
	// The components take their configuration only from a KubeVirt CR that
	// virt-operator has given a phase (virt-config's GetConfigFromKubeVirtCR), and
	// the default architecture from its status, which virt-operator sets as
	// KubeVirtDeploymentConfig.SetDefaultArchitecture does.
	kvCR.Status.Phase = kubevirtv1.KubeVirtPhaseDeployed
	kvCR.Status.DefaultArchitecture = runtime.GOARCH
	if a := opts.Configuration.ArchitectureConfiguration; a != nil && a.DefaultArchitecture != "" {
		kvCR.Status.DefaultArchitecture = a.DefaultArchitecture
	}
	if err := env.Client.Status().Update(ctx, kvCR); err != nil {
		return nil, fmt.Errorf("failed to mark the KubeVirt CR deployed: %w", err)
	}

	for _, name := range components {
		kubeconfig, err := k.installIdentity(ctx, filepath.Join(install, "rbac-"+name+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var args []string
		switch name {
		case "virt-api":
			args = []string{"--tls-cert-file=" + crt, "--tls-key-file=" + key,
				"--handler-cert-file=" + crt, "--handler-key-file=" + key}
		case "virt-controller":
			args = []string{"--prom-cert-file=" + crt, "--prom-key-file=" + key, "--launcher-image=" + LauncherImage}
		}
		proc, port, err := k.start(ctx, filepath.Join(kvDir, "bin", name), kubeconfig, caBundle, args)
		if err != nil {
			return nil, err
		}
		k.procs = append(k.procs, proc)
		if name == "virt-api" {
			if err := k.installWebhooks(ctx, install, port, caBundle); err != nil {
				return nil, err
			}
		}
	}
	return k, nil
}

// Err reports the first component that exited; they are meant to run until Stop.
func (k *KubeVirt) Err() error {
	return childproc.FirstExit(k.procs)
}

// Stop removes the webhook configurations and the objects Start created (not the
// CRDs), stops the components and removes the temporary directory. It is safe to
// call more than once.
func (k *KubeVirt) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for i := len(k.installed) - 1; i >= 0; i-- {
		errs = append(errs, client.IgnoreNotFound(k.env.Client.Delete(ctx, k.installed[i])))
	}
	k.installed = nil
	for _, proc := range k.procs {
		proc.Stop()
	}
	k.procs = nil
	if k.dir != "" {
		errs = append(errs, os.RemoveAll(k.dir))
		k.dir = ""
	}
	return errors.Join(errs...)
}

// WriteLogs writes the last lines of each component's log to w (all for lines <= 0).
func (k *KubeVirt) WriteLogs(w io.Writer, lines int) {
	fmt.Fprint(w, k.tails(lines))
}

func (k *KubeVirt) tails(lines int) string {
	return childproc.LogTails(k.LogDir, lines, components...)
}

// start runs a component on a free port (its TLS server: webhooks and subresources
// for virt-api, metrics for virt-controller) and waits until it answers. A port taken
// in between makes the component exit; it is retried on another.
func (k *KubeVirt) start(ctx context.Context, path, kubeconfig string, caBundle []byte, args []string) (*childproc.Process, int, error) {
	name := filepath.Base(path)
	logPath := filepath.Join(k.LogDir, name+".log")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := webhook.FreePort()
		if err != nil {
			return nil, 0, err
		}
		argv := append([]string{path, "--kubeconfig=" + kubeconfig,
			"--listen=127.0.0.1", "--port=" + strconv.Itoa(port)}, args...)
		if name == "virt-api" {
			console, err := webhook.FreePort()
			if err != nil {
				return nil, 0, err
			}
			argv = append(argv, "--console-server-port="+strconv.Itoa(console))
		}
		proc, err := childproc.Start(name, logPath, nil, argv...)
		if err != nil {
			return nil, 0, err
		}
		if lastErr = webhook.WaitForServer(ctx, proc, port, caBundle, startTimeout); lastErr == nil {
			return proc, port, nil
		}
		proc.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, fmt.Errorf("%s (log: %s): %w", name, logPath, lastErr)
}

// installIdentity creates the ServiceAccount, roles and bindings in the file (one
// component's, as virt-operator installs them) and returns the path of a kubeconfig
// that authenticates as that service account.
func (k *KubeVirt) installIdentity(ctx context.Context, path string) (string, error) {
	docs, err := webhook.ReadYAMLDocs(path)
	if err != nil {
		return "", err
	}
	var user string
	var groups []string
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(doc); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if obj.GetKind() == "ServiceAccount" {
			user = serviceaccount.MakeUsername(obj.GetNamespace(), obj.GetName())
			groups = serviceaccount.MakeGroupNames(obj.GetNamespace())
		}
		if err := k.env.Client.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("failed to create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		k.installed = append(k.installed, obj)
	}
	if user == "" {
		return "", fmt.Errorf("%s: no ServiceAccount", path)
	}
	kubeconfig := filepath.Join(k.dir, strings.TrimSuffix(filepath.Base(path), ".yaml")+".kubeconfig")
	return kubeconfig, k.env.WriteUserKubeconfig(kubeconfig, user, groups...)
}

// installCRDs creates every CRD in dir that the API server does not have yet (the
// test bed already has KubeVirt's VirtualMachine and VirtualMachineInstance CRDs,
// from the same generator) and waits until all are established.
func (k *KubeVirt) installCRDs(ctx context.Context, dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.kubevirt.io.yaml"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s: run `make kubevirt`", dir)
	}
	var names []string
	for _, path := range paths {
		docs, err := webhook.ReadYAMLDocs(path)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := json.Unmarshal(doc, crd); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := k.env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("failed to install CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k.env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// installWebhooks installs virt-operator's webhook configurations for virt-api,
// calling the process on port.
func (k *KubeVirt) installWebhooks(ctx context.Context, dir string, port int, caBundle []byte) error {
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for file, obj := range map[string]any{"webhook-mutating.yaml": mutating, "webhook-validating.yaml": validating} {
		docs, err := webhook.ReadYAMLDocs(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		if len(docs) != 1 {
			return fmt.Errorf("%s: want one webhook configuration, found %d documents", file, len(docs))
		}
		if err := json.Unmarshal(docs[0], obj); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	for i := range mutating.Webhooks {
		if err := webhook.PointAt(&mutating.Webhooks[i].ClientConfig, port, caBundle); err != nil {
			return fmt.Errorf("webhook %s: %w", mutating.Webhooks[i].Name, err)
		}
	}
	for i := range validating.Webhooks {
		if err := webhook.PointAt(&validating.Webhooks[i].ClientConfig, port, caBundle); err != nil {
			return fmt.Errorf("webhook %s: %w", validating.Webhooks[i].Name, err)
		}
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := k.env.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("failed to install %T %s: %w", obj, obj.GetName(), err)
		}
		k.installed = append(k.installed, obj)
	}
	return nil
}

// componentsDir returns the directory named by EnvKubeVirt, checking that it holds
// the components and install manifests. Tests fail, not skip, without them.
func componentsDir() (string, error) {
	const hint = "run `make kubevirt` and `eval \"$(make -s kubevirt-env)\"` before `go test`"
	dir := os.Getenv(EnvKubeVirt)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: %s", EnvKubeVirt, hint)
	}
	files := []string{"install/webhook-mutating.yaml", "install/webhook-validating.yaml"}
	for _, name := range components {
		files = append(files, "bin/"+name, "install/rbac-"+name+".yaml")
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%s=%s: %w: %s", EnvKubeVirt, dir, err, hint)
		}
	}
	return dir, nil
}
