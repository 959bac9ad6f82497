// Package localenv brings up knest's host environment on a machine without KVM or a
// container engine: the test bed's etcd, kube-apiserver and kube-controller-manager,
// the real Cluster API and CAPK managers, the KubeVirt stand-in running VMs as qemu
// processes, and knest's controller. `make demo` and `make e2e` use it.
package localenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/e2e/providers"
	"github.com/knest-dev/knest/e2e/standin"
	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
)

// EnvNodeImages names the directory of node images (`make node-image`'s out/).
const EnvNodeImages = "KNEST_NODE_IMAGES"

// EnvAccel names qemu's accelerator for the VMs, tcg or kvm: what
// images/scripts/kvm-probe.sh prints, which the Makefile runs and which honours the
// same variable when it is set by hand.
const EnvAccel = "KNEST_ACCEL"

// Options configure Start.
type Options struct {
	// StateDir keeps the VMs' disks and consoles and every component's log.
	StateDir string
	// ImagesDir holds the node images; empty reads $KNEST_NODE_IMAGES.
	ImagesDir string
	// Accel is qemu's accelerator (standin.AccelTCG or AccelKVM); empty reads
	// $KNEST_ACCEL, and TCG when that is unset too.
	Accel string
}

// Env is a running host environment.
type Env struct {
	Host      *testenv.Env
	Providers *providers.Providers
	StandIn   *standin.StandIn
	// LogDir holds one log per component (knest.log for the controller and stand-in).
	LogDir string
	// NodeVersions are the Kubernetes versions with a node image, oldest first; the
	// host's admission policy refuses clusters at any other.
	NodeVersions []string

	mu         sync.Mutex
	stopCtrl   context.CancelFunc
	ctrlDone   chan error
	controller manager.Options
}

// Start brings the environment up; on error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Env, retErr error) {
	if opts.ImagesDir == "" {
		opts.ImagesDir = os.Getenv(EnvNodeImages)
	}
	if opts.ImagesDir == "" {
		return nil, fmt.Errorf("%s is not set: run `make node-image` and point it at $(KNEST_CACHE)/node-image/out", EnvNodeImages)
	}
	if opts.StateDir == "" {
		return nil, errors.New("localenv: StateDir is required")
	}
	if opts.Accel == "" {
		opts.Accel = os.Getenv(EnvAccel)
	}
	e := &Env{
		LogDir: filepath.Join(opts.StateDir, "logs"),
		// CAPK checks over SSH that kubeadm finished, as it does by default. A worker
		// VM, at a lower priority than the control plane's under emulation on 2 cores,
		// took more than the default 20 minutes to join (docs/e2e.md): the health check
		// replaced it, and its replacement met the same wait.
		controller: manager.Options{Render: cluster.Options{
			BootstrapCheck:     cluster.BootstrapCheckSSH,
			NodeStartupTimeout: 40 * time.Minute,
		}},
	}
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = e.Stop()
		}
	}()
	logFile, err := os.OpenFile(filepath.Join(e.LogDir, "knest.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	if e.Host, err = testenv.Start(ctx); err != nil {
		return nil, fmt.Errorf("test bed: %w", err)
	}
	if e.NodeVersions, err = installNodeVersions(ctx, e.Host, opts.ImagesDir); err != nil {
		return nil, fmt.Errorf("node image list: %w", err)
	}
	if e.Providers, err = providers.Start(ctx, e.Host, providers.Options{LogDir: e.LogDir}); err != nil {
		return nil, fmt.Errorf("cluster API providers: %w", err)
	}
	if e.StandIn, err = standin.Start(ctx, e.Host.Config, standin.Options{
		ImagesDir: opts.ImagesDir,
		StateDir:  filepath.Join(opts.StateDir, "standin"),
		Accel:     opts.Accel,
	}); err != nil {
		return nil, fmt.Errorf("KubeVirt stand-in: %w", err)
	}
	if err := e.StartController(); err != nil {
		return nil, err
	}
	return e, nil
}

// StartController starts knest's controller (in this process).
func (e *Env) StartController() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopCtrl != nil {
		return errors.New("the knest controller is already running")
	}
	mgr, err := manager.New(e.Host.Config, e.controller)
	if err != nil {
		return fmt.Errorf("knest controller: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.stopCtrl, e.ctrlDone = cancel, done
	return nil
}

// StopController stops knest's controller (reconciles in flight finish; nothing
// else of its own is cleaned up).
func (e *Env) StopController() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopCtrl == nil {
		return nil
	}
	e.stopCtrl()
	err := <-e.ctrlDone
	e.stopCtrl, e.ctrlDone = nil, nil
	return err
}

// Stop stops everything: VMs, managers, test bed. Safe on a partial Env.
func (e *Env) Stop() error {
	var errs []error
	errs = append(errs, e.StopController())
	if e.StandIn != nil {
		errs = append(errs, e.StandIn.Stop())
	}
	if e.Providers != nil {
		errs = append(errs, e.Providers.Stop())
	}
	if e.Host != nil {
		errs = append(errs, e.Host.Stop())
	}
	return errors.Join(errs...)
}
