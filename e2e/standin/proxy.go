package standin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// reconcileService proxies a Service that selects VMIs on its ClusterIP (and reports
// that address as its LoadBalancer ingress when it is of type LoadBalancer): the part
// of kube-proxy and of a LoadBalancer implementation the tenant control plane needs.
func (s *StandIn) reconcileService(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	if err := s.client.Get(ctx, req.NamespacedName, svc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			s.proxy.remove(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ip, ok := proxiedAddr(svc)
	if !ok {
		s.proxy.remove(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := s.client.List(ctx, vmis, client.InNamespace(svc.Namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		return ctrl.Result{}, err
	}
	var backends []string
	for i := range vmis.Items {
		if a, ok := vmiAddr(&vmis.Items[i]); ok {
			backends = append(backends, a.String())
		}
	}
	if err := s.proxy.set(ctx, req.NamespacedName, ip, svc.Spec.Ports, backends); err != nil {
		return ctrl.Result{}, err
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		(len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != ip.String()) {
		base := svc.DeepCopy()
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String()}}
		return ctrl.Result{}, s.client.Status().Patch(ctx, svc, client.MergeFrom(base))
	}
	return ctrl.Result{}, nil
}

// proxiedAddr is the address the proxy serves svc on, if it serves it: an IPv4
// ClusterIP of a Service with a selector.
func proxiedAddr(svc *corev1.Service) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	return ip, svc.DeletionTimestamp == nil && len(svc.Spec.Selector) > 0 && err == nil && ip.Is4()
}

// vmiAddr is the address of a VMI that runs (a pod IP, a Service backend).
func vmiAddr(vmi *kubevirtv1.VirtualMachineInstance) (netip.Addr, bool) {
	if vmi.Status.Phase != kubevirtv1.Running || vmi.DeletionTimestamp != nil || len(vmi.Status.Interfaces) == 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(vmi.Status.Interfaces[0].IP)
	return a, err == nil && a.Is4()
}

// targetPort is the backend port the proxy forwards port to; false if the proxy
// does not serve it (only TCP; a named targetPort is taken as the port itself).
func targetPort(port corev1.ServicePort) (int, bool) {
	if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
		return 0, false
	}
	if t := port.TargetPort.IntValue(); t > 0 {
		return t, true
	}
	return int(port.Port), true
}

// servicesOf maps a VMI to the Services of its namespace that select it.
func (s *StandIn) servicesOf(ctx context.Context, o client.Object) []reconcile.Request {
	svcs := &corev1.ServiceList{}
	if err := s.client.List(ctx, svcs, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, svc := range svcs.Items {
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(o.GetLabels())) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&svc)})
		}
	}
	return reqs
}

// serviceProxy forwards TCP connections from Service addresses to backends.
type serviceProxy struct {
	net *network
	mu  sync.Mutex
	svc map[types.NamespacedName]*proxiedService
}

type proxiedService struct {
	ip        netip.Addr
	listeners map[string]*listener // "port/targetPort"
}

type listener struct {
	l        net.Listener
	target   int
	backends atomic.Pointer[[]string]
	next     atomic.Uint64
}

func newServiceProxy(n *network) *serviceProxy {
	return &serviceProxy{net: n, svc: map[types.NamespacedName]*proxiedService{}}
}

func (p *serviceProxy) set(ctx context.Context, key types.NamespacedName, ip netip.Addr, ports []corev1.ServicePort, backends []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.svc[key]
	if ps != nil && ps.ip != ip {
		p.removeLocked(key)
		ps = nil
	}
	if ps == nil {
		if err := p.net.addAddress(ctx, ip); err != nil {
			return err
		}
		ps = &proxiedService{ip: ip, listeners: map[string]*listener{}}
		p.svc[key] = ps
	}
	want := map[string]bool{}
	for _, port := range ports {
		target, ok := targetPort(port)
		if !ok {
			continue
		}
		id := strconv.Itoa(int(port.Port)) + "/" + strconv.Itoa(target)
		want[id] = true
		l := ps.listeners[id]
		if l == nil {
			nl, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(int(port.Port))))
			if err != nil {
				return err
			}
			l = &listener{l: nl, target: target}
			ps.listeners[id] = l
			go l.serve()
		}
		b := append([]string(nil), backends...)
		l.backends.Store(&b)
	}
	for id, l := range ps.listeners {
		if !want[id] {
			_ = l.l.Close()
			delete(ps.listeners, id)
		}
	}
	return nil
}

func (p *serviceProxy) remove(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(key)
}

func (p *serviceProxy) removeLocked(key types.NamespacedName) {
	ps := p.svc[key]
	if ps == nil {
		return
	}
	for _, l := range ps.listeners {
		_ = l.l.Close()
	}
	p.net.deleteAddress(ps.ip)
	delete(p.svc, key)
}

func (p *serviceProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.svc {
		p.removeLocked(key)
	}
}

func (l *listener) serve() {
	for {
		c, err := l.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go l.forward(c)
	}
}

// forward connects to the backends in turn, starting at the next one, until one
// answers: a backend that is still booting refuses, and the next may not.
func (l *listener) forward(c net.Conn) {
	defer c.Close()
	backends := *l.backends.Load()
	start := l.next.Add(1)
	for i := range backends {
		addr := net.JoinHostPort(backends[(int(start)+i)%len(backends)], strconv.Itoa(l.target))
		b, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			continue
		}
		defer b.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(b, c); closeWrite(b); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, b); closeWrite(c); done <- struct{}{} }()
		<-done
		<-done
		return
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
