package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Only a preference, by host node, among the pods of the given labels: a host with
// fewer nodes than replicas must still place them all.
func TestSpreadAcrossHostsIsAPreferenceByNode(t *testing.T) {
	labels := map[string]string{"app": "etcd", "cluster": "demo"}
	a := SpreadAcrossHosts(labels)
	if a.PodAntiAffinity == nil || a.PodAffinity != nil || a.NodeAffinity != nil {
		t.Fatalf("want pod anti-affinity only, got %+v", a)
	}
	if req := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution; len(req) != 0 {
		t.Fatalf("want no required terms, got %+v", req)
	}
	pref := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(pref) != 1 {
		t.Fatalf("want one preferred term, got %d", len(pref))
	}
	term := pref[0].PodAffinityTerm
	if term.TopologyKey != corev1.LabelHostname {
		t.Errorf("topology key %q, want %q", term.TopologyKey, corev1.LabelHostname)
	}
	if got := term.LabelSelector.MatchLabels; len(got) != 2 || got["app"] != "etcd" || got["cluster"] != "demo" {
		t.Errorf("selector %v, want %v", got, labels)
	}
	labels["app"] = "changed"
	if term.LabelSelector.MatchLabels["app"] == "changed" {
		t.Errorf("the selector shares the caller's map")
	}
}
