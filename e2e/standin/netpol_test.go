package standin

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

const clusterLabel = "cluster.x-k8s.io/cluster-name"

// Two tenants in ns1 (alpha, gamma), one in ns2 (beta), a DNS pod of the host.
var (
	alpha1 = pod("ns1", "192.168.213.11", clusterLabel, "alpha")
	alpha2 = pod("ns1", "192.168.213.12", clusterLabel, "alpha")
	beta1  = pod("ns2", "192.168.213.13", clusterLabel, "beta")
	gamma1 = pod("ns1", "192.168.213.14", clusterLabel, "gamma")
	dns    = pod("kube-system", "192.168.213.20", "k8s-app", "kube-dns")

	alphaLB = svc("10.0.0.10", []servicePort{{6443, 6443}}, alpha1, alpha2)
	betaLB  = svc("10.0.0.20", []servicePort{{6443, 6443}}, beta1)
	gammaLB = svc("10.0.0.30", []servicePort{{6443, 6443}}, gamma1)
)

func pod(ns, ip string, kv ...string) egressPod {
	l := map[string]string{"kubevirt.io": "virt-launcher"}
	for i := 0; i < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return egressPod{Namespace: ns, Labels: l, IP: netip.MustParseAddr(ip)}
}

func svc(clusterIP string, ports []servicePort, backends ...egressPod) egressService {
	s := egressService{ClusterIP: netip.MustParseAddr(clusterIP), Ports: ports}
	for _, b := range backends {
		s.Backends = append(s.Backends, b.IP)
	}
	return s
}

func policy(ns, name string, sel map[string]string, types []networkingv1.PolicyType, rules ...networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: types,
			Egress:      rules,
		},
	}
}

var egressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}

// knestPolicy is the policy knest renders for a tenant cluster.
func knestPolicy(ns, name string) networkingv1.NetworkPolicy {
	nc := &knestv1.NestedCluster{}
	nc.Namespace, nc.Name = ns, name
	cluster.Default(nc)
	g, err := cluster.Render(nc, cluster.Options{})
	if err != nil {
		panic(err)
	}
	return *g.Isolation
}

// chains parses a rendered table into its chains' rules (hook lines left out).
func chains(t *testing.T, ruleset string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var cur string
	for _, l := range strings.Split(ruleset, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "chain "):
			cur = strings.TrimSuffix(strings.TrimPrefix(l, "chain "), " {")
			out[cur] = []string{}
		case l == "}":
			cur = ""
		case cur != "" && l != "" && !strings.HasPrefix(l, "type filter hook"):
			out[cur] = append(out[cur], l)
		}
	}
	return out
}

func wantChain(t *testing.T, got map[string][]string, name string, want ...string) {
	t.Helper()
	if !slices.Equal(got[name], want) {
		t.Errorf("chain %s:\n  got  %q\n  want %q", name, got[name], want)
	}
}

var (
	everyPod = []egressPod{alpha1, alpha2, beta1, gamma1, dns}
	everySvc = []egressService{alphaLB, betaLB, gammaLB}
)

func TestEgressUnselectedPodsAreUnrestricted(t *testing.T) {
	if got, _ := renderEgress(egressInput{Pods: everyPod, Services: everySvc}); got != "" {
		t.Errorf("no policy: want no table, got\n%s", got)
	}
	in := egressInput{Pods: everyPod, Services: everySvc, Policies: []networkingv1.NetworkPolicy{knestPolicy("ns1", "alpha")}}
	got, _ := renderEgress(in)
	c := chains(t, got)
	// gamma shares alpha's namespace, beta and the DNS pod do not: none is selected.
	// Ingress first: a packet must be let in by its destination and out by its source.
	wantChain(t, c, "forward", "ct state established,related accept",
		"ip daddr 192.168.213.11 jump ingress_192_168_213_11",
		"ip daddr 192.168.213.12 jump ingress_192_168_213_12",
		"ip saddr 192.168.213.11 jump egress_192_168_213_11",
		"ip saddr 192.168.213.12 jump egress_192_168_213_12")
	wantChain(t, c, "input", "ct state established,related accept",
		"ip saddr 192.168.213.11 ip daddr @clusterips jump svc_192_168_213_11",
		"ip saddr 192.168.213.12 ip daddr @clusterips jump svc_192_168_213_12")
	if len(c) != 8 {
		t.Errorf("want forward, input and three chains per alpha VM, got %d chains:\n%s", len(c), got)
	}
	if !strings.Contains(got, "elements = { 10.0.0.10, 10.0.0.20, 10.0.0.30 }") {
		t.Errorf("the clusterips set lists every proxied Service:\n%s", got)
	}
}

func TestEgressKnestPolicy(t *testing.T) {
	in := egressInput{
		Pods:     everyPod,
		Services: everySvc,
		Policies: []networkingv1.NetworkPolicy{knestPolicy("ns1", "alpha"), knestPolicy("ns2", "beta"), knestPolicy("ns1", "gamma")},
		// Namespace labels as the API server sets them; namespaceSelector {} needs none.
		Namespaces: map[string]map[string]string{"ns1": {corev1.LabelMetadataName: "ns1"}},
	}
	got, warnings := renderEgress(in)
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	c := chains(t, got)
	outside := "ip daddr != { 10.0.0.0/8, 100.64.0.0/10, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16 } accept"
	dnsRules := []string{"ip daddr { 192.168.213.20 } tcp dport { 53 } accept", "ip daddr { 192.168.213.20 } udp dport { 53 } accept"}
	// Own VMs (all ports), the host's DNS pod on 53, the outside world: not beta's or
	// gamma's VMs (their addresses are private).
	for _, ip := range []string{"11", "12"} {
		wantChain(t, c, "egress_192_168_213_"+ip, append(append([]string{"ip daddr { 192.168.213.11, 192.168.213.12 } accept"}, dnsRules...), outside, "drop")...)
		wantChain(t, c, "svc_192_168_213_"+ip, "ip daddr 10.0.0.10 tcp dport { 6443 } accept", "drop")
	}
	// Into alpha's VMs: alpha's VMs, the API port from anywhere; no CAPK pod runs here.
	for _, ip := range []string{"11", "12"} {
		wantChain(t, c, "ingress_192_168_213_"+ip, "ip saddr { 192.168.213.11, 192.168.213.12 } return", "tcp dport { 6443 } return", "drop")
	}
	wantChain(t, c, "egress_192_168_213_13", append(append([]string{"ip daddr { 192.168.213.13 } accept"}, dnsRules...), outside, "drop")...)
	wantChain(t, c, "svc_192_168_213_13", "ip daddr 10.0.0.20 tcp dport { 6443 } accept", "drop")
	wantChain(t, c, "svc_192_168_213_14", "ip daddr 10.0.0.30 tcp dport { 6443 } accept", "drop")
	if _, ok := c["egress_192_168_213_20"]; ok {
		t.Error("the DNS pod is selected by no policy")
	}
}

func TestEgressPortsAndServices(t *testing.T) {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	p80, p443, p53, p6000 := intstr.FromInt32(80), intstr.FromInt32(443), intstr.FromInt32(53), intstr.FromInt32(6000)
	http, dnsName := intstr.FromString("http"), intstr.FromString("dns")
	toGamma := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{clusterLabel: "gamma"}}}}
	pol := policy("ns1", "ports", map[string]string{clusterLabel: "alpha"}, egressOnly,
		networkingv1.NetworkPolicyEgressRule{To: toGamma, Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &tcp, Port: &p80},
			{Port: &p443}, // TCP by default
			{Protocol: &udp, Port: &p53, EndPort: ptr.To[int32](55)},
			{Protocol: &sctp}, // every SCTP port
			{Protocol: &tcp, Port: &http},
		}},
		// No `to`: any destination, on these ports.
		networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p6000, EndPort: ptr.To[int32](7000)}}},
		// Named ports only: allows nothing (not every port).
		networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &dnsName}}},
	)
	web := svc("10.0.0.40", []servicePort{{8080, 80}, {2222, 22}, {9000, 6500}, {9001, 7001}}, gamma1)
	got, warnings := renderEgress(egressInput{Pods: everyPod, Services: []egressService{web}, Policies: []networkingv1.NetworkPolicy{pol}})
	c := chains(t, got)
	wantChain(t, c, "egress_192_168_213_11",
		"ip daddr { 192.168.213.14 } meta l4proto sctp accept",
		"ip daddr { 192.168.213.14 } tcp dport { 80, 443 } accept",
		"ip daddr { 192.168.213.14 } udp dport { 53-55 } accept",
		"tcp dport { 6000-7000 } accept",
		"drop")
	// Judged at the backend's target port: 80 by the first rule, 6500 by the second.
	wantChain(t, c, "svc_192_168_213_11", "ip daddr 10.0.0.40 tcp dport { 8080, 9000 } accept", "drop")
	for _, name := range []string{`"http"`, `"dns"`} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "named port "+name) }) {
			t.Errorf("no warning for named port %s: %q", name, warnings)
		}
	}
}

func TestEgressPeers(t *testing.T) {
	label := func(kv ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}
	}
	nsTeam := map[string]map[string]string{"ns2": {"team": "x"}, "kube-system": {"team": "x"}}
	for _, tc := range []struct {
		name           string
		peer           networkingv1.NetworkPolicyPeer
		egress, svcOut []string
	}{{
		name:   "podSelector alone: the policy's namespace",
		peer:   networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}},
		egress: []string{"ip daddr { 192.168.213.11, 192.168.213.12, 192.168.213.14 } accept"},
		svcOut: []string{"ip daddr 10.0.0.10 tcp dport { 6443 } accept", "ip daddr 10.0.0.30 tcp dport { 6443 } accept"},
	}, {
		name:   "namespaceSelector alone: every pod of those namespaces",
		peer:   networkingv1.NetworkPolicyPeer{NamespaceSelector: label("team", "x")},
		egress: []string{"ip daddr { 192.168.213.13, 192.168.213.20 } accept"},
		svcOut: []string{"ip daddr 10.0.0.20 tcp dport { 6443 } accept"},
	}, {
		name:   "both: those pods in those namespaces",
		peer:   networkingv1.NetworkPolicyPeer{NamespaceSelector: label("team", "x"), PodSelector: label("k8s-app", "kube-dns")},
		egress: []string{"ip daddr { 192.168.213.20 } accept"},
	}, {
		name:   "namespaceSelector on the name label",
		peer:   networkingv1.NetworkPolicyPeer{NamespaceSelector: label(corev1.LabelMetadataName, "ns2")},
		egress: []string{"ip daddr { 192.168.213.13 } accept"},
		svcOut: []string{"ip daddr 10.0.0.20 tcp dport { 6443 } accept"},
	}, {
		name:   "a selector matching no pod allows nothing",
		peer:   networkingv1.NetworkPolicyPeer{PodSelector: label("app", "none")},
		egress: nil,
	}, {
		name: "ipBlock covers VMI addresses too",
		peer: networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.213.8/29",
			Except: []string{"192.168.213.12/32", "192.168.213.12/32", "10.0.0.0/8"}}},
		egress: []string{"ip daddr 192.168.213.8/29 ip daddr != { 192.168.213.12/32 } accept"},
		// alpha-lb: .11 is in the block; beta-lb: .13; gamma-lb: .14 is in it too.
		svcOut: []string{"ip daddr 10.0.0.10 tcp dport { 6443 } accept", "ip daddr 10.0.0.20 tcp dport { 6443 } accept", "ip daddr 10.0.0.30 tcp dport { 6443 } accept"},
	}, {
		name:   "a ClusterIP in an ipBlock is not enough: the backends decide",
		peer:   networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}},
		egress: []string{"ip daddr 10.0.0.0/8 accept"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pol := policy("ns1", "p", map[string]string{clusterLabel: "alpha"}, egressOnly,
				networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{tc.peer}})
			got, _ := renderEgress(egressInput{Pods: everyPod, Services: everySvc, Namespaces: nsTeam, Policies: []networkingv1.NetworkPolicy{pol}})
			c := chains(t, got)
			wantChain(t, c, "egress_192_168_213_11", append(tc.egress, "drop")...)
			wantChain(t, c, "svc_192_168_213_11", append(tc.svcOut, "drop")...)
		})
	}
}

func TestEgressPolicyTypes(t *testing.T) {
	anywhere := networkingv1.NetworkPolicyEgressRule{}
	alpha := map[string]string{clusterLabel: "alpha"}
	ingressOnly := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	for _, tc := range []struct {
		name    string
		pol     networkingv1.NetworkPolicy
		egress  []string // alpha1's egress chain, nil if not isolated for egress
		ingress []string // alpha1's ingress chain, nil if not isolated for ingress
	}{
		{"no types, no egress rules: ingress only, deny all", policy("ns1", "p", alpha, nil), nil, []string{"drop"}},
		{"no types, egress rules: ingress and egress", policy("ns1", "p", alpha, nil, anywhere), []string{"accept", "drop"}, []string{"drop"}},
		{"egress without rules: deny all", policy("ns1", "p", alpha, egressOnly), []string{"drop"}, nil},
		{"ingress only: egress rules ignored", policy("ns1", "p", alpha, ingressOnly, anywhere), nil, []string{"drop"}},
		{"empty podSelector selects every pod of the namespace", policy("ns1", "p", nil, egressOnly), []string{"drop"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := renderEgress(egressInput{Pods: everyPod, Services: everySvc, Policies: []networkingv1.NetworkPolicy{tc.pol}})
			if len(warnings) != 0 {
				t.Errorf("warnings: %q", warnings)
			}
			c := chains(t, got)
			wantChain(t, c, "egress_192_168_213_11", tc.egress...)
			wantChain(t, c, "ingress_192_168_213_11", tc.ingress...)
			if tc.egress != nil && tc.egress[0] == "drop" {
				wantChain(t, c, "svc_192_168_213_11", "drop")
			}
		})
	}
}

// An ingress rule with peers and ports, and a rule with ports only.
func TestIngressPeersAndPorts(t *testing.T) {
	tcp := corev1.ProtocolTCP
	p22, p443 := intstr.FromInt32(22), intstr.FromInt32(443)
	pol := networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "in"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{clusterLabel: "alpha"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p22}}},
				{Ports: []networkingv1.NetworkPolicyPort{{Port: &p443}}},
			},
		},
	}
	got, _ := renderEgress(egressInput{Pods: everyPod, Policies: []networkingv1.NetworkPolicy{pol}})
	c := chains(t, got)
	wantChain(t, c, "ingress_192_168_213_12", "ip saddr { 192.168.213.20 } tcp dport { 22 } return", "tcp dport { 443 } return", "drop")
	if _, ok := c["egress_192_168_213_12"]; ok {
		t.Error("an ingress-only policy isolates no egress")
	}
}

func TestEgressPoliciesAddUp(t *testing.T) {
	toBeta := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{clusterLabel: "beta"}},
	}}}
	got, _ := renderEgress(egressInput{Pods: everyPod, Services: everySvc, Policies: []networkingv1.NetworkPolicy{
		knestPolicy("ns1", "alpha"),
		policy("ns1", "to-beta", map[string]string{clusterLabel: "alpha"}, egressOnly, toBeta),
		policy("ns1", "alpha-again", map[string]string{clusterLabel: "alpha"}, egressOnly, knestPolicy("ns1", "alpha").Spec.Egress[0]),
	}})
	c := chains(t, got)
	egress := c["egress_192_168_213_11"]
	if !slices.Contains(egress, "ip daddr { 192.168.213.13 } accept") {
		t.Errorf("a second policy's rule is missing: %q", egress)
	}
	if n := len(slices.DeleteFunc(slices.Clone(egress), func(l string) bool { return l != "ip daddr { 192.168.213.11, 192.168.213.12 } accept" })); n != 1 {
		t.Errorf("a rule two policies share is written %d times: %q", n, egress)
	}
	wantChain(t, c, "svc_192_168_213_11", "ip daddr 10.0.0.10 tcp dport { 6443 } accept", "ip daddr 10.0.0.20 tcp dport { 6443 } accept", "drop")
}

// TestEgressInputFromObjects checks what a VMI and a Service become: a VMI that runs
// is a pod with virt-launcher's labels (which the knest policy selects on); one
// that does not run is neither pod nor backend.
func TestEgressInputFromObjects(t *testing.T) {
	vmi := func(ns, name, ip string, phase kubevirtv1.VirtualMachineInstancePhase) kubevirtv1.VirtualMachineInstance {
		return kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterLabel: "alpha"}},
			Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase,
				Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: ip}}},
		}
	}
	vmis := []kubevirtv1.VirtualMachineInstance{
		vmi("ns1", "a", "192.168.213.11", kubevirtv1.Running),
		vmi("ns1", "b", "192.168.213.12", kubevirtv1.Failed),
		vmi("ns2", "c", "192.168.213.13", kubevirtv1.Running),
	}
	if l := podLabels(&vmis[0]); l["kubevirt.io"] != "virt-launcher" || l[clusterLabel] != "alpha" {
		t.Errorf("pod labels: %v", l)
	}
	if _, ok := vmiAddr(&vmis[1]); ok {
		t.Error("a Failed VMI has no pod IP")
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "alpha-lb"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.10", Selector: map[string]string{clusterLabel: "alpha"}, Ports: []corev1.ServicePort{
			{Port: 6443, TargetPort: intstr.FromInt32(6444)},
			{Port: 53, Protocol: corev1.ProtocolUDP},
			{Port: 22, TargetPort: intstr.FromString("ssh")},
		}},
	}
	got, ok := egressServiceOf(s, vmis)
	want := svc("10.0.0.10", []servicePort{{6443, 6444}, {22, 22}}, pod("", "192.168.213.11"))
	if !ok || got.ClusterIP != want.ClusterIP || !slices.Equal(got.Ports, want.Ports) || !slices.Equal(got.Backends, want.Backends) {
		t.Errorf("service: %+v, %v; want %+v (TCP ports, Running backends of its namespace)", got, ok, want)
	}
}

// TestEgressRulesetLoads has nft check what the stand-in would load (nft -c: no
// change to the host's rules).
func TestEgressRulesetLoads(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	p53 := intstr.FromInt32(53)
	ports := policy("ns1", "ports", map[string]string{clusterLabel: "alpha"}, egressOnly,
		networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &tcp, Port: &p53, EndPort: ptr.To[int32](60)}, {Protocol: &udp}, {Protocol: ptr.To(corev1.ProtocolSCTP), Port: &p53},
		}},
		networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}}},
	)
	for name, in := range map[string]egressInput{
		"knest": {Pods: everyPod, Services: everySvc, Policies: []networkingv1.NetworkPolicy{knestPolicy("ns1", "alpha"), knestPolicy("ns2", "beta")}},
		"ports": {Pods: everyPod, Policies: []networkingv1.NetworkPolicy{ports, policy("ns2", "deny", nil, egressOnly)}},
		"none":  {Pods: everyPod},
	} {
		ruleset, _ := renderEgress(in)
		if err := loadRuleset(context.Background(), ruleset, true); err != nil {
			t.Errorf("%s: %v\n%s", name, err, ruleset)
		}
	}
}

// DNS goes only to the host's DNS pods: not to a pod that calls itself kube-dns in a
// tenant's namespace, nor to another pod of kube-system.
func TestEgressKnestPolicyDNSOnlyToTheHostsDNSPods(t *testing.T) {
	impostor := pod("ns2", "192.168.213.21", "k8s-app", "kube-dns")
	other := pod("kube-system", "192.168.213.22", "app", "metrics")
	got, _ := renderEgress(egressInput{
		Pods:     append(slices.Clone(everyPod), impostor, other),
		Policies: []networkingv1.NetworkPolicy{knestPolicy("ns1", "alpha")},
	})
	egress := chains(t, got)["egress_192_168_213_11"]
	for _, want := range []string{"ip daddr { 192.168.213.20 } tcp dport { 53 } accept", "ip daddr { 192.168.213.20 } udp dport { 53 } accept"} {
		if !slices.Contains(egress, want) {
			t.Errorf("missing %q in %q", want, egress)
		}
	}
	for _, l := range egress {
		if strings.Contains(l, "192.168.213.21") || strings.Contains(l, "192.168.213.22") {
			t.Errorf("DNS allowed to a pod that is not the host's DNS: %q", l)
		}
	}
}
