// Package testenv starts the integration test bed: etcd, kube-apiserver and
// kube-controller-manager built from source (make testbin), with the real CRDs of
// Cluster API, CAPK, KubeVirt and knest installed. Behaviour that an API server
// decides (validation, defaulting, ownership, garbage collection, conflicts) is
// tested here, never with a fake client.
//
// A test package typically starts one Env in TestMain and shares it:
//
//	func TestMain(m *testing.M) {
//		env, err := testenv.Start(context.Background())
//		if err != nil {
//			fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		if err := env.Stop(); err != nil {
//			fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
//		}
//		os.Exit(code)
//	}
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	infrav1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1alpha1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/childproc"
)

const (
	// EnvTestBin names the directory holding etcd, kube-apiserver and
	// kube-controller-manager (set by `make test`).
	EnvTestBin = "KNEST_TESTBIN"
	// EnvKubeVirtCRDs names the directory holding the generated KubeVirt CRDs.
	EnvKubeVirtCRDs = "KNEST_KUBEVIRT_CRDS"

	// A 2-core machine running several test packages at once is slow to start
	// kube-apiserver; envtest's 20s default is not enough there.
	startTimeout = 2 * time.Minute
)

// Env is a running test bed. Its fields are read-only.
type Env struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Client is an uncached client using Scheme.
	Client client.Client
	// Scheme knows client-go, apiextensions, CAPI, CAPK, KubeVirt and knest types.
	Scheme *runtime.Scheme
	// KubeconfigPath is an admin kubeconfig file, valid until Stop.
	KubeconfigPath string

	env *envtest.Environment
	kcm *childproc.Process
	dir string
}

// NewScheme returns a scheme with every API group knest talks to.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		addonsv1.AddToScheme,
		infrav1.AddToScheme,
		kubevirtv1.AddToScheme,
		knestv1alpha1.AddToScheme,
		hcpv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// Start starts etcd and kube-apiserver with all CRDs installed, then
// kube-controller-manager, and returns once all of them serve. On error nothing is
// left running.
func Start(ctx context.Context) (_ *Env, retErr error) {
	binDir, err := dirFromEnv(EnvTestBin, "etcd", "kube-apiserver", "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kubevirtDir, err := dirFromEnv(EnvKubeVirtCRDs)
	if err != nil {
		return nil, err
	}
	crds, err := loadAllCRDs(ctx, kubevirtDir)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "knest-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: NewScheme(), dir: dir}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()

	e.env = &envtest.Environment{
		// Explicit paths: KUBEBUILDER_ASSETS would otherwise override BinaryAssetsDirectory
		// and silently test against other binaries.
		BinaryAssetsDirectory:    binDir,
		CRDs:                     crds,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		// envtest turns on webhook conversion for every CRD whose kinds are Hub/spoke
		// convertible in this scheme (CAPI's are). No webhook server runs here, so give
		// it an empty scheme: it then removes any conversion webhook instead.
		Scheme: runtime.NewScheme(),
	}
	e.env.ControlPlane.GetAPIServer().Path = filepath.Join(binDir, "kube-apiserver")
	e.env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binDir, "etcd")}
	if err := configureRequestHeader(e.env.ControlPlane.GetAPIServer(), dir); err != nil {
		return nil, err
	}
	// As kubeadm's API server: a worker's join token authenticates (package jointoken).
	e.env.ControlPlane.GetAPIServer().Configure().Set("enable-bootstrap-token-auth", "true")

	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("failed to start etcd and kube-apiserver from %s: %w", binDir, err)
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	e.KubeconfigPath = filepath.Join(dir, "admin.kubeconfig")
	if err := e.WriteKubeconfig(e.KubeconfigPath); err != nil {
		return nil, err
	}
	// After the CRDs, so the garbage collector's first discovery already sees them
	// (it rediscovers only every 30s).
	if e.kcm, err = startControllerManager(ctx, e, filepath.Join(binDir, "kube-controller-manager")); err != nil {
		return nil, err
	}
	return e, nil
}

// Stop stops all processes and removes all temporary files. It is safe to call on a
// partially started Env and more than once.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil {
		e.kcm.Stop()
		e.kcm = nil
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("failed to stop etcd and kube-apiserver: %w", err))
		}
		e.env = nil
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
		e.dir = ""
	}
	return errors.Join(errs...)
}

// Kubeconfig is an admin kubeconfig of the test bed's API server.
func (e *Env) Kubeconfig() []byte { return e.env.KubeConfig }

// WriteKubeconfig writes an admin kubeconfig for this API server to path, for code
// that takes a kubeconfig file (the CLI).
func (e *Env) WriteKubeconfig(path string) error {
	return writeKubeconfig(path, e.env.KubeConfig)
}

// WriteUserKubeconfig writes a kubeconfig for user name in groups to path: a client
// certificate whose identity RBAC authorizes like any other, for a component that
// must run as itself (KubeVirt's admission lets only its own service accounts write
// some fields, by user name).
func (e *Env) WriteUserKubeconfig(path, name string, groups ...string) error {
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return fmt.Errorf("failed to add user %s: %w", name, err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("failed to make a kubeconfig for %s: %w", name, err)
	}
	return writeKubeconfig(path, kubeconfig)
}

func writeKubeconfig(path string, kubeconfig []byte) error {
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("failed to write kubeconfig: %w", err)
	}
	return nil
}

// dirFromEnv returns the directory named by env var name, checking that it holds the
// given files. Tests must fail, not skip, without a test bed.
func dirFromEnv(name string, files ...string) (string, error) {
	const hint = "run `make test`, or `make testbin` and then `eval \"$(make -s testbin-env)\"` before `go test`"
	dir := os.Getenv(name)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: %s", name, hint)
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s=%s: %w: %s", name, dir, err, hint)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%s=%s: %w: %s", name, dir, err, hint)
		}
	}
	return dir, nil
}
