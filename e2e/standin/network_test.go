package standin

import (
	"net/netip"
	"slices"
	"testing"
)

func TestNamesAndAddresses(t *testing.T) {
	if n := tapName("0b7e2a47-6a2c-4c51-9d7f-0d1f6c2b9a10"); len(n) > 15 {
		t.Errorf("tap name %q is longer than IFNAMSIZ-1", n)
	}
	if a, b := macFor("a"), macFor("b"); a == b || a[:9] != "52:54:00:" {
		t.Errorf("MACs %q and %q: want distinct, with qemu's locally administered prefix", a, b)
	}
	p := netip.MustParsePrefix("192.168.213.0/24")
	if got := prefixMask(p); got != "255.255.255.0" {
		t.Errorf("prefixMask = %s", got)
	}
	if got := lastAddr(p); got != netip.MustParseAddr("192.168.213.255") {
		t.Errorf("lastAddr = %s", got)
	}
}

// testNetwork is a network without a bridge or dnsmasq, for the address allocator.
func testNetwork(t *testing.T, prefix string) *network {
	p := netip.MustParsePrefix(prefix)
	return &network{
		prefix: p, gateway: p.Addr().Next(), dir: t.TempDir(),
		used: map[netip.Addr]string{}, hosts: map[string]string{},
	}
}

func TestAllocateIsStablePerOwnerAndReleases(t *testing.T) {
	n := testNetwork(t, "10.9.0.0/28")
	a, err := n.allocate("ns/a", macFor("a"))
	if err != nil || a != netip.MustParseAddr("10.9.0.11") {
		t.Fatalf("first address: %s, %v (.1 is the gateway, .2 to .10 are left to the host)", a, err)
	}
	if again, _ := n.allocate("ns/a", macFor("a")); again != a {
		t.Errorf("same owner got %s, then %s", a, again)
	}
	b, _ := n.allocate("ns/b", macFor("b"))
	for _, o := range []string{"c", "d"} {
		if _, err := n.allocate("ns/"+o, macFor(o)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.allocate("ns/e", macFor("e")); err == nil {
		t.Error("a /28 has room for 4 VMs (.11 to .14; .15 is the broadcast address), not 5")
	}
	n.release("ns/b")
	if got, err := n.allocate("ns/e", macFor("e")); err != nil || got != b {
		t.Errorf("after release: %s, %v; want the freed %s", got, err, b)
	}
	if len(n.hosts) != 4 {
		t.Errorf("DHCP hosts: %v", n.hosts)
	}
}

// dnsmasq keeps a released address leased to the old MAC: it must be reused last.
func TestAllocateReusesReleasedAddressesLast(t *testing.T) {
	n := testNetwork(t, "10.9.0.0/28")
	var got []string
	alloc := func(o string) {
		t.Helper()
		a, err := n.allocate("ns/"+o, macFor(o))
		if err != nil {
			t.Fatalf("allocate %s: %v", o, err)
		}
		got = append(got, a.String())
	}
	alloc("cp")        // .11
	alloc("w1")        // .12
	alloc("w2")        // .13: scale up
	n.release("ns/w1") // scale down
	alloc("w3")        // .14, not .12: a replacement
	n.release("ns/w2")
	alloc("w4") // the lap wraps: .12 is free again
	alloc("w5") // .13
	want := []string{"10.9.0.11", "10.9.0.12", "10.9.0.13", "10.9.0.14", "10.9.0.12", "10.9.0.13"}
	if !slices.Equal(got, want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
	if _, err := n.allocate("ns/w6", macFor("w6")); err == nil {
		t.Error("allocated a fifth address in a /28 with room for four")
	}
	if a, err := testNetwork(t, "10.9.0.0/29").allocate("ns/w7", macFor("w7")); err == nil {
		t.Errorf("allocated %s in a /29, which has no room after the host's ten", a)
	}
}
