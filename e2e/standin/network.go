package standin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/knest-dev/knest/internal/childproc"
)

// network is the stand-in's pod network: a bridge in the host's network namespace,
// with dnsmasq handing each VM the address the stand-in allocated for it (DHCP, and
// DNS without upstream so CoreDNS in the tenant has a resolver to forward to). It is
// in the host namespace so the controllers and the user's shell reach VM addresses
// and the Service addresses the stand-in proxies, as they would reach pod and
// Service IPs from inside a cluster. Its names are the stand-in's own and are
// removed on close.
type network struct {
	bridge  string
	prefix  netip.Prefix
	gateway netip.Addr
	dir     string

	mu      sync.Mutex
	used    map[netip.Addr]string // address -> owner (VMI key)
	next    netip.Addr            // where the next allocation starts looking
	hosts   map[string]string     // MAC -> address, the dnsmasq hosts file
	dnsmasq *exec.Cmd
}

func newNetwork(ctx context.Context, bridge string, prefix netip.Prefix, dir string) (*network, error) {
	n := &network{
		bridge:  bridge,
		prefix:  prefix.Masked(),
		gateway: prefix.Masked().Addr().Next(),
		dir:     dir,
		used:    map[netip.Addr]string{},
		hosts:   map[string]string{},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A bridge left by a stand-in that was killed is ours: start clean.
	n.killStaleDNSMasq()
	_ = run(ctx, "ip", "link", "delete", bridge)
	cidr := fmt.Sprintf("%s/%d", n.gateway, n.prefix.Bits())
	for _, args := range [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", cidr, "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
	} {
		if err := run(ctx, args...); err != nil {
			n.close()
			return nil, err
		}
	}
	if err := n.writeHosts(); err != nil {
		n.close()
		return nil, err
	}
	if err := n.startDNSMasq(); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *network) hostsFile() string { return filepath.Join(n.dir, "dhcp-hosts") }

// startDNSMasq serves DHCP only to the MACs in the hosts file (re-read on SIGHUP), so
// a VM's address is known before it boots, as a pod's is.
func (n *network) startDNSMasq() error {
	// --user=root: dnsmasq otherwise drops to an unprivileged user that cannot read
	// a hosts file under a private directory (such as root's ~/.cache).
	n.dnsmasq = exec.Command("dnsmasq", "--keep-in-foreground", "--user=root", "--no-resolv", "--no-hosts",
		"--interface="+n.bridge, "--bind-interfaces", "--except-interface=lo",
		"--listen-address="+n.gateway.String(),
		"--dhcp-range="+n.prefix.Addr().String()+",static,"+prefixMask(n.prefix)+",12h",
		"--dhcp-hostsfile="+n.hostsFile(),
		"--dhcp-leasefile="+filepath.Join(n.dir, "dnsmasq.leases"),
		"--dhcp-option=option:router,"+n.gateway.String(),
		"--log-dhcp", "--log-facility="+filepath.Join(n.dir, "dnsmasq.log"))
	n.dnsmasq.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.dnsmasq.Start(); err != nil {
		return fmt.Errorf("failed to start dnsmasq (apt-get install dnsmasq): %w", err)
	}
	// dnsmasq exits at once when it cannot bind; say so now rather than time out later.
	exited := make(chan error, 1)
	go func() { exited <- n.dnsmasq.Wait() }()
	select {
	case err := <-exited:
		log, _ := os.ReadFile(filepath.Join(n.dir, "dnsmasq.log"))
		return fmt.Errorf("dnsmasq exited: %v: %s", err, childproc.Tail(string(log), 5))
	case <-time.After(time.Second):
		go func() { <-exited }()
		return nil
	}
}

// killStaleDNSMasq ends a dnsmasq left serving this bridge by a stand-in that was
// killed (its socket would keep the gateway's DHCP and DNS ports).
func (n *network) killStaleDNSMasq() {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "dnsmasq" && slices.Contains(args, "--interface="+n.bridge) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// allocate reserves an address for owner and publishes it to DHCP under mac.
// Addresses are handed out in turn, so a released one is reused last: dnsmasq keeps
// a deleted VM's lease (12 h), and while it does it refuses that address to the next
// VM's MAC ("no address available"), which then never gets one. Measured: a killed
// worker's restarted instance was given the address of the worker scaled down just
// before, and never got past DHCP.
func (n *network) allocate(owner, mac string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, o := range n.used {
		if o == owner {
			return a, nil
		}
	}
	// .1 is the gateway; the first ten are left for the host's own use.
	first := n.gateway
	for range 10 {
		first = first.Next()
	}
	last := lastAddr(n.prefix) // the broadcast address
	if !first.Less(last) {
		return netip.Addr{}, fmt.Errorf("%s is too small: VMs get addresses from .11 on", n.prefix)
	}
	start := n.next
	if !start.IsValid() || start.Less(first) || !start.Less(last) {
		start = first
	}
	for a := start; ; {
		if _, taken := n.used[a]; !taken {
			n.used[a] = owner
			n.hosts[mac] = a.String()
			n.next = a.Next()
			return a, n.publish()
		}
		if a = a.Next(); !a.Less(last) {
			a = first
		}
		if a == start {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("no free address left in %s", n.prefix)
}

func (n *network) release(owner string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, o := range n.used {
		if o == owner {
			delete(n.used, a)
			for mac, ip := range n.hosts {
				if ip == a.String() {
					delete(n.hosts, mac)
				}
			}
		}
	}
	_ = n.publish()
}

// publish rewrites the hosts file and tells dnsmasq to read it again.
func (n *network) publish() error {
	if err := n.writeHosts(); err != nil {
		return err
	}
	if n.dnsmasq != nil && n.dnsmasq.Process != nil {
		return n.dnsmasq.Process.Signal(syscall.SIGHUP)
	}
	return nil
}

func (n *network) writeHosts() error {
	lines := make([]string, 0, len(n.hosts))
	for mac, ip := range n.hosts {
		lines = append(lines, mac+","+ip)
	}
	slices.Sort(lines)
	tmp := n.hostsFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.hostsFile())
}

// addTap creates the tap device of one VM on the bridge.
func (n *network) addTap(ctx context.Context, name string) error {
	_ = run(ctx, "ip", "link", "delete", name)
	for _, args := range [][]string{
		{"ip", "tuntap", "add", "dev", name, "mode", "tap"},
		{"ip", "link", "set", name, "master", n.bridge},
		{"ip", "link", "set", name, "up"},
	} {
		if err := run(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (n *network) deleteTap(name string) {
	_ = run(context.Background(), "ip", "link", "delete", name)
}

// addAddress makes a Service address local to the host (on the bridge), so the
// stand-in's proxy can listen on it and VMs reach it through their default route.
func (n *network) addAddress(ctx context.Context, a netip.Addr) error {
	return run(ctx, "ip", "addr", "replace", a.String()+"/32", "dev", n.bridge)
}

func (n *network) deleteAddress(a netip.Addr) {
	_ = run(context.Background(), "ip", "addr", "delete", a.String()+"/32", "dev", n.bridge)
}

func (n *network) close() {
	if n.dnsmasq != nil && n.dnsmasq.Process != nil {
		_ = n.dnsmasq.Process.Kill()
	}
	_ = run(context.Background(), "ip", "link", "delete", n.bridge)
}

// tapName is a stable interface name (at most 15 bytes) for a VMI.
func tapName(uid string) string {
	h := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("kn%x", h[:6])
}

// macFor is a stable, locally administered MAC for a VMI.
func macFor(uid string) string {
	h := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

func prefixMask(p netip.Prefix) string {
	bits := p.Bits()
	m := uint32(0xffffffff) << (32 - bits)
	return fmt.Sprintf("%d.%d.%d.%d", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(0xffffffff) >> p.Bits()
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return fmt.Errorf("%s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return nil
}
