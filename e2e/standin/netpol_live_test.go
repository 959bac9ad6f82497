package standin

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// The test binary doubles as the listener and the dialer inside the namespaces.
const netnsHelperEnv = "KNEST_STANDIN_NETNS_HELPER"

func TestMain(m *testing.M) {
	switch role, addr, _ := strings.Cut(os.Getenv(netnsHelperEnv), "="); role {
	case "listen":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err == nil {
				c.Close()
			}
		}
	case "dial":
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			os.Exit(1)
		}
		c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEgressRulesetDropsPackets (ingress too) loads the rules of two tenants into a network
// namespace of its own holding a bridge (with br_netfilter, as on the stand-in's
// host) and three VMs' worth of endpoints, and opens real TCP connections.
func TestEgressRulesetDropsPackets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces)")
	}
	prefix := fmt.Sprintf("knpt%d", os.Getpid()%100000)
	hub := prefix + "-hub"
	run := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("", "ip", "netns", "add", hub)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", hub).Run() })
	run("", "ip", "-n", hub, "link", "add", "br0", "type", "bridge")
	run("", "ip", "-n", hub, "link", "set", "br0", "up")
	run("", "ip", "netns", "exec", hub, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")

	a1 := pod("ns1", "10.77.0.11", clusterLabel, "alpha")
	a2 := pod("ns1", "10.77.0.12", clusterLabel, "alpha")
	b1 := pod("ns2", "10.77.0.13", clusterLabel, "beta")
	vms := map[netip.Addr]string{}
	for i, p := range []egressPod{a1, a2, b1} {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		vms[p.IP] = ns
		run("", "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		port := fmt.Sprintf("p%d", i)
		run("", "ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", hub)
		run("", "ip", "-n", hub, "link", "set", port, "master", "br0", "up")
		run("", "ip", "-n", ns, "addr", "add", p.IP.String()+"/24", "dev", "eth0")
		run("", "ip", "-n", ns, "link", "set", "eth0", "up")
		// Any port, and the tenant API server's.
		for _, port := range []string{"8080", "6443"} {
			listener := exec.Command("ip", "netns", "exec", ns, os.Args[0])
			listener.Env = append(os.Environ(), netnsHelperEnv+"=listen=:"+port)
			if err := listener.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = listener.Process.Kill(); _ = listener.Wait() })
		}
	}
	connectsTo := func(from, to egressPod, port string, attempts int) bool {
		for range attempts {
			dial := exec.Command("ip", "netns", "exec", vms[from.IP], os.Args[0])
			dial.Env = append(os.Environ(), netnsHelperEnv+"=dial="+to.IP.String()+":"+port)
			if dial.Run() == nil {
				return true
			}
			time.Sleep(200 * time.Millisecond)
		}
		return false
	}
	connects := func(from, to egressPod, attempts int) bool { return connectsTo(from, to, "8080", attempts) }
	// Without rules everything connects (and the listeners are up: retry until then).
	for _, c := range [][2]egressPod{{a1, a2}, {a1, b1}, {b1, a1}} {
		if !connects(c[0], c[1], 20) || !connectsTo(c[0], c[1], "6443", 20) {
			t.Fatalf("without rules, %s cannot reach %s: the setup is broken", c[0].IP, c[1].IP)
		}
	}

	ruleset, _ := renderEgress(egressInput{
		Pods:     []egressPod{a1, a2, b1},
		Policies: []networkingv1.NetworkPolicy{knestPolicy("ns1", "alpha")},
	})
	run(nftScript(ruleset), "ip", "netns", "exec", hub, "nft", "-f", "-")
	for _, c := range []struct {
		from, to egressPod
		port     string
		want     bool
	}{
		{a1, a2, "8080", true},  // own cluster, any port
		{a1, b1, "8080", false}, // another tenant (a private address)
		{a1, b1, "6443", false}, // its API server too: alpha's egress stops it
		{b1, a1, "8080", false}, // beta has no policy, but alpha's ingress stops it
		{b1, a1, "6443", true},  // except on the API server's port, and alpha's replies pass
	} {
		if got := connectsTo(c.from, c.to, c.port, 1); got != c.want {
			t.Errorf("%s → %s:%s: connected %v, want %v\n%s", c.from.IP, c.to.IP, c.port, got, c.want, ruleset)
		}
	}
}
