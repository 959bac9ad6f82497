// Package standin is a KubeVirt stand-in for machines without KVM. It watches
// VirtualMachines and behaves like KubeVirt as Cluster API's KubeVirt provider sees it:
// a VirtualMachineInstance per running VM, a qemu process (software emulation) per
// VMI booted from the VMI's spec, the cloud-init disk from the referenced Secret, the
// VMI's phase, Ready condition and interface IP, the VM's printableStatus, runStrategy
// and deletion with nothing left running. VMs sit on a bridge with DHCP; Services
// that select VMIs are proxied on their ClusterIP, as kube-proxy would, so the tenant
// API behind `<cluster>-lb` is reachable from the host and from the VMs.
// NetworkPolicy egress is enforced on the bridge with nftables, as a CNI enforces it
// for virt-launcher pods.
//
// What differs from KubeVirt is listed in docs/local-host.md.
package standin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Options configure a stand-in.
type Options struct {
	// ImagesDir holds node images (`make node-image`'s out/ directory); a
	// containerDisk or kernel-boot reference is looked up in their manifests.
	ImagesDir string
	// StateDir holds per-VM disk overlays, seeds and console logs, and dnsmasq's files.
	StateDir string
	// Bridge is the name of the bridge the stand-in creates (and deletes first if it
	// exists). Default knest0.
	Bridge string
	// Network is the VMs' subnet; the bridge has its first address. Default
	// 192.168.213.0/24.
	Network netip.Prefix
	// Accel is qemu's accelerator, AccelTCG (the default) or AccelKVM. KVM only where
	// images/scripts/kvm-probe.sh has booted a kernel under it: on some hosts
	// /dev/kvm exists and qemu aborts or the guest hangs (../shared/DESIGN.md).
	Accel string
}

// Accelerators qemu runs the VMs with.
const (
	AccelTCG = "tcg" // software emulation: slow, runs anywhere
	AccelKVM = "kvm"
)

// StandIn runs VirtualMachines as qemu processes.
type StandIn struct {
	opts     Options
	client   client.Client
	reader   client.Reader
	net      *network
	proxy    *serviceProxy
	nodeName string
	exits    chan event.GenericEvent

	mu       sync.Mutex
	machines map[client.ObjectKey]*running
	egress   egressState

	cancel context.CancelFunc
	done   chan error
}

type running struct {
	uid string
	*machine
}

// Start creates the network and runs the stand-in's controllers against cfg until
// Stop.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (_ *StandIn, retErr error) {
	if opts.Bridge == "" {
		opts.Bridge = "knest0"
	}
	if !opts.Network.IsValid() {
		opts.Network = netip.MustParsePrefix("192.168.213.0/24")
	}
	if opts.ImagesDir == "" || opts.StateDir == "" {
		return nil, errors.New("standin: ImagesDir and StateDir are required")
	}
	switch opts.Accel {
	case "":
		opts.Accel = AccelTCG
	case AccelTCG, AccelKVM:
	default:
		return nil, fmt.Errorf("standin: accelerator %q: want %s or %s", opts.Accel, AccelTCG, AccelKVM)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start more than one stand-in in a process, one after another.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	s := &StandIn{
		opts:     opts,
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		nodeName: host,
		exits:    make(chan event.GenericEvent, 64),
		machines: map[client.ObjectKey]*running{},
		egress:   egressState{warned: map[string]bool{}},
		done:     make(chan error, 1),
	}
	removeRuleset() // left by a stand-in that was killed
	if s.net, err = newNetwork(ctx, opts.Bridge, opts.Network, filepath.Join(opts.StateDir, "network")); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.net.close()
		}
	}()
	s.proxy = newServiceProxy(s.net)

	if err := ctrl.NewControllerManagedBy(mgr).Named("standin-vm").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Complete(reconcileFunc(s.reconcileVM)); err != nil {
		return nil, err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("standin-vmi").
		For(&kubevirtv1.VirtualMachineInstance{}).
		WatchesRawSource(source.Channel(s.exits, &handler.EnqueueRequestForObject{})).
		Complete(reconcileFunc(s.reconcileVMI)); err != nil {
		return nil, err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("standin-service").
		For(&corev1.Service{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(s.servicesOf)).
		Complete(reconcileFunc(s.reconcileService)); err != nil {
		return nil, err
	}
	if err := s.setupNetworkPolicies(mgr); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() { s.done <- mgr.Start(runCtx) }()
	return s, nil
}

// Stop ends every VM, the proxy and the network.
func (s *StandIn) Stop() error {
	s.cancel()
	err := <-s.done
	s.mu.Lock()
	for key, m := range s.machines {
		m.stop()
		s.net.deleteTap(m.tap)
		delete(s.machines, key)
	}
	s.mu.Unlock()
	s.proxy.close()
	s.net.close()
	removeRuleset()
	return err
}

// Console is the path of a VMI's serial console log.
func (s *StandIn) Console(key client.ObjectKey) string {
	return filepath.Join(s.vmDir(key), "console.log")
}

// PID is the qemu process of a VMI, 0 if it has none.
func (s *StandIn) PID(key client.ObjectKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.machines[key]; m != nil && !m.exited() {
		return m.pid()
	}
	return 0
}

func (s *StandIn) vmDir(key client.ObjectKey) string {
	return filepath.Join(s.opts.StateDir, "vms", key.Namespace, key.Name)
}

func reconcileFunc(f func(context.Context, ctrl.Request) (ctrl.Result, error)) reconcile.Func {
	return f
}
