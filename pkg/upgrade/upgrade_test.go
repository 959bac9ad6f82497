package upgrade

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/kubever"
)

func TestRequestValidate(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"version only", Request{Version: "v1.35.4"}, ""},
		{"hold and release other pools", Request{Version: "v1.35.4", HoldPools: []string{"gpu"}, ReleasePools: []string{"workers"}}, ""},
		{"no version", Request{}, "no version to upgrade to"},
		{"no v", Request{Version: "1.35.4"}, `version "1.35.4": ` + kubever.RangeMessage},
		{"out of range", Request{Version: "v1.37.0"}, kubever.RangeMessage},
		{"not canonical", Request{Version: "v1.35.04"}, kubever.RangeMessage},
		{"bad pool name", Request{Version: "v1.35.4", HoldPools: []string{"GPU"}}, `pool "GPU": pool name must be a DNS label`},
		{"held twice", Request{Version: "v1.35.4", HoldPools: []string{"gpu", "gpu"}}, "pool gpu is named twice to be held"},
		{"released twice", Request{Version: "v1.35.4", ReleasePools: []string{"gpu", "gpu"}}, "pool gpu is named twice to be released"},
		{"held and released", Request{Version: "v1.35.4", HoldPools: []string{"gpu"}, ReleasePools: []string{"gpu"}}, "pool gpu cannot be both held and released"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tt.req.Validate()
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestNormalizeVersion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NormalizeVersion("1.35.4")).To(Equal("v1.35.4"))
	g.Expect(NormalizeVersion("v1.35.4")).To(Equal("v1.35.4"))
	g.Expect(NormalizeVersion("")).To(Equal(""))
}

// testCluster is a NestedCluster at v1.34.4 with pools workers (following spec.version),
// gpu (following) and old (held at v1.33.2).
func testCluster() *knestv1.NestedCluster {
	return &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a"},
		Spec: knestv1.NestedClusterSpec{
			Version: "v1.34.4",
			Workers: []knestv1.WorkerPool{
				{Name: "workers", Replicas: ptr.To[int32](2)},
				{Name: "gpu", Replicas: ptr.To[int32](1)},
				{Name: "old", Replicas: ptr.To[int32](1), Version: "v1.33.2"},
			},
		},
	}
}

func versions(spec knestv1.NestedClusterSpec) map[string]string {
	out := map[string]string{"": spec.Version}
	for _, p := range spec.Workers {
		out[p.Name] = p.Version
	}
	return out
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		req       Request
		versions  map[string]string
		changes   []string
		stillHeld []PoolVersion
		empty     bool
	}{{
		name:      "the control plane and the pools that follow it; a held pool stays",
		req:       Request{Version: "v1.35.0"},
		versions:  map[string]string{"": "v1.35.0", "workers": "", "gpu": "", "old": "v1.33.2"},
		changes:   []string{"control plane v1.34.4 -> v1.35.0"},
		stillHeld: []PoolVersion{{"old", "v1.33.2"}},
	}, {
		name:      "hold a pool at the version it runs",
		req:       Request{Version: "v1.35.0", HoldPools: []string{"gpu"}},
		versions:  map[string]string{"": "v1.35.0", "workers": "", "gpu": "v1.34.4", "old": "v1.33.2"},
		changes:   []string{"control plane v1.34.4 -> v1.35.0", "pool gpu held at v1.34.4"},
		stillHeld: []PoolVersion{{"old", "v1.33.2"}},
	}, {
		name:      "holding a held pool changes nothing for it",
		req:       Request{Version: "v1.35.0", HoldPools: []string{"old"}},
		versions:  map[string]string{"": "v1.35.0", "workers": "", "gpu": "", "old": "v1.33.2"},
		changes:   []string{"control plane v1.34.4 -> v1.35.0"},
		stillHeld: []PoolVersion{{"old", "v1.33.2"}},
	}, {
		name:     "release at the same version is a change",
		req:      Request{Version: "v1.34.4", ReleasePools: []string{"old"}},
		versions: map[string]string{"": "v1.34.4", "workers": "", "gpu": "", "old": ""},
		changes:  []string{"pool old released to follow v1.34.4"},
	}, {
		name:      "the same version and nothing to hold is empty",
		req:       Request{Version: "v1.34.4"},
		versions:  map[string]string{"": "v1.34.4", "workers": "", "gpu": "", "old": "v1.33.2"},
		stillHeld: []PoolVersion{{"old", "v1.33.2"}},
		empty:     true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := testCluster()
			before := nc.DeepCopy()
			plan, err := Apply(nc, tt.req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nc).To(Equal(before), "Apply leaves its input alone")
			g.Expect(versions(plan.Spec)).To(Equal(tt.versions))
			g.Expect(plan.Changes()).To(Equal(tt.changes))
			g.Expect(plan.StillHeld).To(Equal(tt.stillHeld))
			g.Expect(plan.Empty()).To(Equal(tt.empty))
			g.Expect(plan.From).To(Equal("v1.34.4"))
			g.Expect(plan.To).To(Equal(tt.req.Version))
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"unknown pool to hold", Request{Version: "v1.35.0", HoldPools: []string{"tpu"}}, `the cluster has no worker pool "tpu"; its pools are workers, gpu, old`},
		{"unknown pool to release", Request{Version: "v1.35.0", ReleasePools: []string{"tpu"}}, `the cluster has no worker pool "tpu"`},
		{"release a pool that is not held", Request{Version: "v1.35.0", ReleasePools: []string{"gpu"}}, "pool gpu is not held: it follows spec.version (v1.34.4)"},
		{"invalid request", Request{Version: "v2.0.0"}, kubever.RangeMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Apply(testCluster(), tt.req)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}
