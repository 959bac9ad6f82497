package nodetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// network is a bridge with DHCP and DNS (dnsmasq) inside a network namespace that
// exists only for one test: no uplink, so a guest can reach nothing but its peers.
type network struct {
	ns      string
	bridge  string
	gateway string // the bridge's address, the guests' DHCP and DNS server
	prefix  string // first three octets
	dir     string
	dnsmasq *exec.Cmd
	taps    int
}

func newNetwork(ctx context.Context, dir string) (*network, error) {
	n := &network{
		ns:     fmt.Sprintf("knest-nodetest-%d", os.Getpid()),
		bridge: "br0",
		prefix: "192.168.231",
		dir:    dir,
	}
	n.gateway = n.prefix + ".1"
	steps := [][]string{
		{"ip", "netns", "add", n.ns},
		n.in("ip", "link", "set", "lo", "up"),
		n.in("ip", "link", "add", n.bridge, "type", "bridge"),
		n.in("ip", "addr", "add", n.gateway+"/24", "dev", n.bridge),
		n.in("ip", "link", "set", n.bridge, "up"),
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			n.close()
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return n, nil
}

// in wraps a command to run inside the namespace.
func (n *network) in(args ...string) []string {
	return append([]string{"ip", "netns", "exec", n.ns}, args...)
}

// startDNSMasq serves DHCP with a fixed address per MAC and DNS without upstream;
// every query is logged, so a registry lookup would show in the log.
func (n *network) startDNSMasq(hosts map[string]string) error {
	args := n.in("dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
		"--interface="+n.bridge, "--bind-interfaces", "--except-interface=lo",
		"--dhcp-range="+n.prefix+".100,"+n.prefix+".200,12h",
		"--dhcp-leasefile="+filepath.Join(n.dir, "dnsmasq.leases"),
		"--pid-file="+filepath.Join(n.dir, "dnsmasq.pid"),
		"--log-queries", "--log-dhcp", "--log-facility="+filepath.Join(n.dir, "dnsmasq.log"))
	for mac, ip := range hosts {
		args = append(args, "--dhcp-host="+mac+","+ip)
	}
	n.dnsmasq = exec.Command(args[0], args[1:]...)
	if err := n.dnsmasq.Start(); err != nil {
		return fmt.Errorf("failed to start dnsmasq: %w", err)
	}
	return nil
}

// addTap creates a tap device on the bridge and returns its name.
func (n *network) addTap() (string, error) {
	n.taps++
	tap := fmt.Sprintf("tap%d", n.taps)
	for _, s := range [][]string{
		n.in("ip", "tuntap", "add", "dev", tap, "mode", "tap"),
		n.in("ip", "link", "set", tap, "master", n.bridge),
		n.in("ip", "link", "set", tap, "up"),
	} {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return tap, nil
}

// dial opens a TCP connection from inside the namespace: the socket is created on a
// thread that has entered the namespace and keeps belonging to it afterwards.
func (n *network) dial(addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left in the namespace and so must die with the goroutine:
		// returning without UnlockOSThread makes the runtime terminate it.
		f, err := os.Open(filepath.Join("/run/netns", n.ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (n *network) close() {
	if n.dnsmasq != nil && n.dnsmasq.Process != nil {
		_ = n.dnsmasq.Process.Kill()
		_, _ = n.dnsmasq.Process.Wait()
	}
	_ = exec.Command("ip", "netns", "delete", n.ns).Run()
}
