package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/internal/childproc"
)

// controllers are the kube-controller-manager controllers whose behaviour knest's
// tests rely on; the others (nodes, pods, volumes, ...) have nothing to act on
// without kubelets and would only cost CPU.
var controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"endpoints-controller",
	"endpointslice-controller",
	// Removes a deleted claim's finalizer once no pod uses it, so claims go with
	// their owners as on a real host.
	"persistentvolumeclaim-protection-controller",
}

func startControllerManager(ctx context.Context, e *Env, path string) (*childproc.Process, error) {
	caFile := filepath.Join(e.dir, "ca.crt")
	if err := os.WriteFile(caFile, e.Config.CAData, 0o600); err != nil {
		return nil, err
	}
	p, err := childproc.Start("kube-controller-manager", filepath.Join(e.dir, "kube-controller-manager.log"), nil,
		path,
		"--kubeconfig="+e.KubeconfigPath,
		"--controllers="+strings.Join(controllers, ","),
		// One instance per test bed; a lease would only delay the start.
		"--leader-elect=false",
		// Test packages run in parallel: a fixed port (10257) would clash. Readiness is
		// checked through the API below instead of /healthz.
		"--secure-port=0",
		// The key envtest's kube-apiserver verifies service account tokens with.
		"--service-account-private-key-file="+filepath.Join(e.env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		"--root-ca-file="+caFile,
		"--v=2",
	)
	if err != nil {
		return nil, err
	}
	if err := waitForControllerManager(ctx, e.Client, p); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// waitForControllerManager returns once the controllers visibly work: the service
// account controller has created the default ServiceAccount and the garbage
// collector has deleted an object whose owner does not exist. The latter matters
// because the garbage collector ignores everything until its informers have synced.
func waitForControllerManager(ctx context.Context, c client.Client, p *childproc.Process) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:      "knest-testenv-gc-probe",
		Namespace: metav1.NamespaceSystem,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: "knest-testenv-gc-probe-owner",
			UID: types.UID("00000000-0000-0000-0000-000000000000"),
		}},
	}}
	if err := c.Create(ctx, probe); err != nil {
		return fmt.Errorf("failed to create garbage collector probe: %w", err)
	}

	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, p.ExitError()
		default:
		}
		if last = c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "default"}, &corev1.ServiceAccount{}); last != nil {
			return false, nil //nolint:nilerr // not up yet: polled again, and last is reported on timeout
		}
		last = c.Get(ctx, client.ObjectKeyFromObject(probe), &corev1.ConfigMap{})
		if apierrors.IsNotFound(last) {
			return true, nil
		}
		if last == nil {
			last = errors.New("garbage collector probe still exists")
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager did not become ready (log: %s): %w (last: %v)", p.LogPath(), err, last)
	}
	return nil
}
