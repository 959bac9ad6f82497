package standin

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NetworkPolicy, enforced as a CNI enforces it for virt-launcher pods: a VMI is a
// pod (its labels plus kubevirt.io=virt-launcher, as KubeVirt labels the launcher
// pod), its address the pod IP. Rules are nftables rules in a table of the
// stand-in's own, replaced as a whole on every change: bridged VM-to-VM traffic
// (br_netfilter) and routed traffic pass the inet forward hook, where the
// destination's ingress rules are checked first (an allowed packet returns) and
// the source's egress rules last; traffic to a proxied Service ClusterIP, which is
// local to the host, passes the input hook and is judged by the source's egress
// rules at its backends, as a CNI judges it after kube-proxy's DNAT. The proxy then
// dials the backend from the host, and the host's own connections are not subject
// to ingress rules (as a node's are not on most CNIs).

// nftTable is the stand-in's nftables table (family inet).
const nftTable = "knest_standin"

// netpolRequest is the one key of the NetworkPolicy controller: the rules are global.
var netpolRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "egress"}}

// egressState is the NetworkPolicy controller's memory (it runs one reconcile at a
// time).
type egressState struct {
	applied string          // ruleset in the kernel, "" for none
	warned  map[string]bool // warnings already logged
}

// setupNetworkPolicies adds the controller that enforces NetworkPolicy egress.
func (s *StandIn) setupNetworkPolicies(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{netpolRequest}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("standin-networkpolicy").
		Watches(&networkingv1.NetworkPolicy{}, all).
		Watches(&kubevirtv1.VirtualMachineInstance{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&corev1.Namespace{}, all).
		Complete(reconcileFunc(s.reconcileNetworkPolicies))
}

// reconcileNetworkPolicies renders the egress rules of every pod and loads them when
// they changed.
func (s *StandIn) reconcileNetworkPolicies(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	in, err := s.readEgressInput(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	ruleset, warnings := renderEgress(in)
	for _, w := range warnings {
		if !s.egress.warned[w] {
			s.egress.warned[w] = true
			logf.FromContext(ctx).Info(w)
		}
	}
	if ruleset == s.egress.applied {
		return ctrl.Result{}, nil
	}
	if err := loadRuleset(ctx, ruleset, false); err != nil {
		return ctrl.Result{}, err
	}
	s.egress.applied = ruleset
	return ctrl.Result{}, nil
}

// readEgressInput reads what the rules depend on from the cache.
func (s *StandIn) readEgressInput(ctx context.Context) (egressInput, error) {
	var (
		pols = &networkingv1.NetworkPolicyList{}
		vmis = &kubevirtv1.VirtualMachineInstanceList{}
		svcs = &corev1.ServiceList{}
		nss  = &corev1.NamespaceList{}
	)
	for _, l := range []client.ObjectList{pols, vmis, svcs, nss} {
		if err := s.client.List(ctx, l); err != nil {
			return egressInput{}, err
		}
	}
	in := egressInput{Policies: pols.Items, Namespaces: map[string]map[string]string{}}
	for _, ns := range nss.Items {
		in.Namespaces[ns.Name] = ns.Labels
	}
	for i := range vmis.Items {
		if ip, ok := vmiAddr(&vmis.Items[i]); ok {
			in.Pods = append(in.Pods, egressPod{Namespace: vmis.Items[i].Namespace, Labels: podLabels(&vmis.Items[i]), IP: ip})
		}
	}
	for i := range svcs.Items {
		if svc, ok := egressServiceOf(&svcs.Items[i], vmis.Items); ok {
			in.Services = append(in.Services, svc)
		}
	}
	return in, nil
}

// podLabels are the labels of a VMI's virt-launcher pod.
func podLabels(vmi *kubevirtv1.VirtualMachineInstance) map[string]string {
	l := map[string]string{}
	for k, v := range vmi.Labels {
		l[k] = v
	}
	l[kubevirtv1.AppLabel] = "virt-launcher"
	return l
}

// egressServiceOf is svc as the proxy serves it: its backends are selected as the
// proxy selects them (on VMI labels).
func egressServiceOf(svc *corev1.Service, vmis []kubevirtv1.VirtualMachineInstance) (egressService, bool) {
	ip, ok := proxiedAddr(svc)
	if !ok {
		return egressService{}, false
	}
	out := egressService{ClusterIP: ip}
	for _, p := range svc.Spec.Ports {
		if t, ok := targetPort(p); ok {
			out.Ports = append(out.Ports, servicePort{Port: int(p.Port), Target: t})
		}
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for i := range vmis {
		if a, ok := vmiAddr(&vmis[i]); ok && vmis[i].Namespace == svc.Namespace && sel.Matches(labels.Set(vmis[i].Labels)) {
			out.Backends = append(out.Backends, a)
		}
	}
	return out, true
}

// loadRuleset replaces the stand-in's table with ruleset in one transaction; ""
// removes it. check only validates (nft -c).
func loadRuleset(ctx context.Context, ruleset string, check bool) error {
	script := nftScript(ruleset)
	args := []string{"-f", "-"}
	if check {
		args = []string{"-c", "-f", "-"}
	}
	cmd := exec.CommandContext(ctx, "nft", args...)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		return fmt.Errorf("nft -f: %s", strings.TrimSpace(string(out)))
	case err != nil:
		return fmt.Errorf("failed to run nft (apt-get install nftables): %w", err)
	}
	return nil
}

// nftScript replaces the stand-in's table with ruleset ("" removes it). nft 1.0.6
// has no `destroy`: adding first makes the delete succeed either way.
func nftScript(ruleset string) string {
	return "add table inet " + nftTable + "\ndelete table inet " + nftTable + "\n" + ruleset
}

// removeRuleset deletes the stand-in's table, if any (nft may be missing where no
// policy was ever enforced).
func removeRuleset() {
	_ = loadRuleset(context.Background(), "", false)
}

// egressInput is everything the egress rules depend on.
type egressInput struct {
	Policies   []networkingv1.NetworkPolicy
	Pods       []egressPod
	Namespaces map[string]map[string]string // name -> labels
	Services   []egressService              // the ones the proxy serves
}

type egressPod struct {
	Namespace string
	Labels    map[string]string
	IP        netip.Addr
}

type egressService struct {
	ClusterIP netip.Addr
	Ports     []servicePort
	Backends  []netip.Addr
}

type servicePort struct{ Port, Target int }

// egressRule is one compiled NetworkPolicyEgressRule.
type egressRule struct {
	anyDest  bool // no `to`
	peers    []egressPeer
	allPorts bool        // no `ports`
	ports    []portMatch // empty with !allPorts: nothing (named ports only)
}

// egressPeer is the pods a selector peer matched, or an ipBlock.
type egressPeer struct {
	pods   []netip.Addr // sorted
	block  netip.Prefix // valid for an ipBlock
	except []netip.Prefix
}

// portMatch is a protocol and a port range; from 0 is every port.
type portMatch struct {
	proto    string // nft name: tcp, udp, sctp
	from, to int
}

// renderEgress is the nftables table enforcing in's egress policies ("" if no pod
// is isolated) and what the policies ask for that it does not do.
func renderEgress(in egressInput) (string, []string) {
	var warn []string
	pods := uniquePods(in.Pods)
	pols := slices.Clone(in.Policies)
	slices.SortFunc(pols, func(a, b networkingv1.NetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	isolated := map[netip.Addr][]egressRule{}     // by source: egress
	isolatedFrom := map[netip.Addr][]egressRule{} // by destination: ingress
	for i := range pols {
		p := &pols[i]
		name := p.Namespace + "/" + p.Name
		ingress, egress := policyTypes(p)
		if !ingress && !egress {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			warn = append(warn, fmt.Sprintf("NetworkPolicy %s: podSelector: %v; policy ignored", name, err))
			continue
		}
		var egressRules, ingressRules []egressRule
		if egress {
			egressRules = compileRules(p, p.Spec.Egress, pods, in.Namespaces, &warn)
		}
		if ingress {
			ingressRules = compileRules(p, ingressAsEgress(p.Spec.Ingress), pods, in.Namespaces, &warn)
		}
		for _, pod := range pods {
			if pod.Namespace != p.Namespace || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if egress {
				isolated[pod.IP] = append(isolated[pod.IP], egressRules...)
			}
			if ingress {
				isolatedFrom[pod.IP] = append(isolatedFrom[pod.IP], ingressRules...)
			}
		}
	}
	if len(isolated) == 0 && len(isolatedFrom) == 0 {
		return "", warn
	}
	return renderTable(isolated, isolatedFrom, in.Services), warn
}

// ingressAsEgress restates ingress rules in the egress form the compiler takes:
// `from` peers match sources where `to` peers match destinations.
func ingressAsEgress(rules []networkingv1.NetworkPolicyIngressRule) []networkingv1.NetworkPolicyEgressRule {
	out := make([]networkingv1.NetworkPolicyEgressRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, networkingv1.NetworkPolicyEgressRule{To: r.From, Ports: r.Ports})
	}
	return out
}

// policyTypes applies the API's default: Ingress, plus Egress if there are egress
// rules.
func policyTypes(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress),
		slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// uniquePods sorts pods by address and keeps one per address.
func uniquePods(pods []egressPod) []egressPod {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b egressPod) int { return a.IP.Compare(b.IP) })
	return slices.CompactFunc(out, func(a, b egressPod) bool { return a.IP == b.IP })
}

func compileRules(p *networkingv1.NetworkPolicy, spec []networkingv1.NetworkPolicyEgressRule, pods []egressPod, nsLabels map[string]map[string]string, warn *[]string) []egressRule {
	name := p.Namespace + "/" + p.Name
	rules := make([]egressRule, 0, len(spec))
	for _, r := range spec {
		rule := egressRule{anyDest: len(r.To) == 0, allPorts: len(r.Ports) == 0}
		for _, peer := range r.To {
			if c, ok := compilePeer(p.Namespace, peer, pods, nsLabels, name, warn); ok {
				rule.peers = append(rule.peers, c)
			}
		}
		for _, port := range r.Ports {
			if m, ok := compilePort(port, name, warn); ok {
				rule.ports = append(rule.ports, m)
			}
		}
		rules = append(rules, rule)
	}
	return rules
}

func compilePeer(ns string, peer networkingv1.NetworkPolicyPeer, pods []egressPod, nsLabels map[string]map[string]string, name string, warn *[]string) (egressPeer, bool) {
	if b := peer.IPBlock; b != nil {
		block, err := netip.ParsePrefix(b.CIDR)
		if err != nil || !block.Addr().Is4() {
			// The VMs have IPv4 only.
			*warn = append(*warn, fmt.Sprintf("NetworkPolicy %s: ipBlock %q skipped: IPv4 CIDRs only", name, b.CIDR))
			return egressPeer{}, false
		}
		out := egressPeer{block: block.Masked()}
		for _, e := range b.Except {
			if x, err := netip.ParsePrefix(e); err == nil && x.Addr().Is4() && x.Overlaps(out.block) {
				out.except = append(out.except, x.Masked())
			}
		}
		slices.SortFunc(out.except, netip.Prefix.Compare)
		out.except = slices.Compact(out.except)
		return out, true
	}
	podSel, nsSel := labels.Everything(), labels.Selector(nil)
	var err error
	if peer.PodSelector != nil {
		podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector)
	}
	if err == nil && peer.NamespaceSelector != nil {
		nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	}
	if err != nil {
		*warn = append(*warn, fmt.Sprintf("NetworkPolicy %s: peer skipped: %v", name, err))
		return egressPeer{}, false
	}
	var out egressPeer
	for _, pod := range pods {
		inNS := pod.Namespace == ns
		if nsSel != nil {
			inNS = nsSel.Matches(namespaceLabels(pod.Namespace, nsLabels))
		}
		if inNS && podSel.Matches(labels.Set(pod.Labels)) {
			out.pods = append(out.pods, pod.IP)
		}
	}
	return out, true
}

// namespaceLabels are a namespace's labels, with the name label the API server sets
// even if the Namespace is not (yet) in the cache.
func namespaceLabels(ns string, nsLabels map[string]map[string]string) labels.Set {
	l := labels.Set{corev1.LabelMetadataName: ns}
	for k, v := range nsLabels[ns] {
		l[k] = v
	}
	return l
}

func compilePort(p networkingv1.NetworkPolicyPort, name string, warn *[]string) (portMatch, bool) {
	proto := corev1.ProtocolTCP
	if p.Protocol != nil {
		proto = *p.Protocol
	}
	m := portMatch{proto: strings.ToLower(string(proto))}
	if !slices.Contains([]string{"tcp", "udp", "sctp"}, m.proto) {
		*warn = append(*warn, fmt.Sprintf("NetworkPolicy %s: protocol %q skipped", name, proto))
		return portMatch{}, false
	}
	switch {
	case p.Port == nil:
	case p.Port.IntValue() == 0:
		*warn = append(*warn, fmt.Sprintf("NetworkPolicy %s: named port %q skipped: the stand-in supports port numbers only", name, p.Port.String()))
		return portMatch{}, false
	default:
		m.from, m.to = p.Port.IntValue(), p.Port.IntValue()
		if p.EndPort != nil && int(*p.EndPort) > m.from {
			m.to = int(*p.EndPort)
		}
	}
	return m, true
}

func (r egressRule) allows(dst netip.Addr, proto string, port int) bool {
	portOK := r.allPorts || slices.ContainsFunc(r.ports, func(m portMatch) bool {
		return m.proto == proto && (m.from == 0 || m.from <= port && port <= m.to)
	})
	return portOK && (r.anyDest || slices.ContainsFunc(r.peers, func(p egressPeer) bool { return p.contains(dst) }))
}

func (p egressPeer) contains(a netip.Addr) bool {
	if p.block.IsValid() {
		return p.block.Contains(a) && !slices.ContainsFunc(p.except, func(e netip.Prefix) bool { return e.Contains(a) })
	}
	_, found := slices.BinarySearchFunc(p.pods, a, netip.Addr.Compare)
	return found
}

// renderTable writes the table: established traffic passes; each destination
// isolated for ingress jumps to its chain, which returns what its policies allow
// and drops the rest; then each source isolated for egress jumps to its chains,
// which accept what its policies allow and drop the rest.
func renderTable(isolated, isolatedFrom map[netip.Addr][]egressRule, svcs []egressService) string {
	srcs := slices.SortedFunc(maps.Keys(isolated), netip.Addr.Compare)
	dsts := slices.SortedFunc(maps.Keys(isolatedFrom), netip.Addr.Compare)
	svcs = slices.Clone(svcs)
	slices.SortFunc(svcs, func(a, b egressService) int { return a.ClusterIP.Compare(b.ClusterIP) })
	clusterIPs := make([]string, 0, len(svcs))
	for _, svc := range svcs {
		clusterIPs = append(clusterIPs, svc.ClusterIP.String())
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "table inet %s {\n", nftTable)
	b.WriteString("\tset clusterips {\n\t\ttype ipv4_addr\n")
	if len(clusterIPs) > 0 {
		fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(slices.Compact(clusterIPs), ", "))
	}
	b.WriteString("\t}\n")
	var forward, input []string
	for _, dst := range dsts {
		forward = append(forward, fmt.Sprintf("ip daddr %s jump %s", dst, chainName("ingress", dst)))
	}
	for _, src := range srcs {
		forward = append(forward, fmt.Sprintf("ip saddr %s jump %s", src, chainName("egress", src)))
		input = append(input, fmt.Sprintf("ip saddr %s ip daddr @clusterips jump %s", src, chainName("svc", src)))
	}
	// Replies of allowed connections, and of the host's own (SSH, the proxy's dials).
	established := "ct state established,related accept"
	writeChain(&b, "forward", "type filter hook forward priority filter; policy accept;", append([]string{established}, forward...))
	writeChain(&b, "input", "type filter hook input priority filter; policy accept;", append([]string{established}, input...))
	for _, dst := range dsts {
		writeChain(&b, chainName("ingress", dst), "", append(ruleLines(isolatedFrom[dst], "saddr", "return"), "drop"))
	}
	for _, src := range srcs {
		rules := isolated[src]
		writeChain(&b, chainName("egress", src), "", append(ruleLines(rules, "daddr", "accept"), "drop"))
		writeChain(&b, chainName("svc", src), "", append(serviceLines(rules, svcs), "drop"))
	}
	b.WriteString("}\n")
	return b.String()
}

func chainName(kind string, src netip.Addr) string {
	return kind + "_" + strings.ReplaceAll(src.String(), ".", "_")
}

func writeChain(b *bytes.Buffer, name, hook string, lines []string) {
	fmt.Fprintf(b, "\n\tchain %s {\n", name)
	if hook != "" {
		fmt.Fprintf(b, "\t\t%s\n", hook)
	}
	for _, l := range lines {
		fmt.Fprintf(b, "\t\t%s\n", l)
	}
	b.WriteString("\t}\n")
}

// ruleLines are the rules of rules, each once, in order: peers matched as addr
// (daddr for egress, saddr for ingress), ending in verdict.
func ruleLines(rules []egressRule, addr, verdict string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rules {
		dests := []string{""}
		if !r.anyDest {
			dests = dests[:0]
			for _, p := range r.peers {
				if d, ok := p.nft(addr); ok {
					dests = append(dests, d)
				}
			}
		}
		for _, d := range dests {
			for _, p := range r.nftPorts() {
				if l := d + p + verdict; !seen[l] {
					seen[l] = true
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// nft is the match of p on addr (daddr or saddr), false if it matches nothing.
func (p egressPeer) nft(addr string) (string, bool) {
	if !p.block.IsValid() {
		if len(p.pods) == 0 {
			return "", false
		}
		return "ip " + addr + " " + nftSet(p.pods) + " ", true
	}
	var s string
	if p.block.Bits() > 0 {
		s = "ip " + addr + " " + p.block.String() + " "
	}
	if len(p.except) > 0 {
		s += "ip " + addr + " != " + nftSet(p.except) + " "
	}
	return s, true
}

// nftPorts are the port matches of r, one per protocol.
func (r egressRule) nftPorts() []string {
	if r.allPorts {
		return []string{""}
	}
	byProto := map[string][]portMatch{}
	for _, m := range r.ports {
		byProto[m.proto] = append(byProto[m.proto], m)
	}
	var out []string
	for _, proto := range []string{"sctp", "tcp", "udp"} {
		ms := byProto[proto]
		if len(ms) == 0 {
			continue
		}
		if slices.ContainsFunc(ms, func(m portMatch) bool { return m.from == 0 }) {
			out = append(out, "meta l4proto "+proto+" ")
			continue
		}
		slices.SortFunc(ms, func(a, b portMatch) int { return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to)) })
		ports := make([]string, 0, len(ms))
		for _, m := range slices.Compact(ms) {
			if m.from == m.to {
				ports = append(ports, strconv.Itoa(m.from))
			} else {
				ports = append(ports, fmt.Sprintf("%d-%d", m.from, m.to))
			}
		}
		out = append(out, proto+" dport "+nftSet(ports)+" ")
	}
	return out
}

// serviceLines accept the Service ports whose connections rules allow to at least
// one backend at the target port: the proxy stands for kube-proxy's DNAT.
func serviceLines(rules []egressRule, svcs []egressService) []string {
	var out []string
	for _, svc := range svcs {
		var ports []int
		for _, p := range svc.Ports {
			if slices.ContainsFunc(svc.Backends, func(b netip.Addr) bool {
				return slices.ContainsFunc(rules, func(r egressRule) bool { return r.allows(b, "tcp", p.Target) })
			}) {
				ports = append(ports, p.Port)
			}
		}
		if len(ports) > 0 {
			slices.Sort(ports)
			out = append(out, fmt.Sprintf("ip daddr %s tcp dport %s accept", svc.ClusterIP, nftSet(slices.Compact(ports))))
		}
	}
	return out
}

// nftSet is an nft anonymous set of elems.
func nftSet[T any](elems []T) string {
	s := make([]string, len(elems))
	for i, e := range elems {
		s[i] = fmt.Sprint(e)
	}
	return "{ " + strings.Join(s, ", ") + " }"
}
