package app_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/knest-dev/knest/pkg/validation"
	"github.com/knest-dev/knest/pkg/validation/validationtest"
)

// TestValidationMatchesTheAPIServer checks that knest's own validation (which the CLI
// runs before touching the cluster) accepts and refuses what the CRD does.
func TestValidationMatchesTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	for i, tt := range validationtest.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			nc := validationtest.Valid()
			tt.Mutate(nc)
			nc.Namespace = ns
			if nc.Name == "demo" {
				nc.Name = fmt.Sprintf("case-%d", i)
			}
			local := validation.NestedCluster(nc)
			err := env.Client.Create(t.Context(), nc)
			if tt.Message == "" {
				g.Expect(local).To(BeEmpty())
				g.Expect(err).NotTo(HaveOccurred(), "the API server must accept what knest accepts")
				return
			}
			g.Expect(local).NotTo(BeEmpty())
			if tt.NotOnServer != "" {
				g.Expect(err).NotTo(HaveOccurred(), "the API server refuses it now: drop NotOnServer (%s)", tt.NotOnServer)
				return
			}
			g.Expect(err).To(HaveOccurred(), "the API server must refuse what knest refuses (%s)", local.ToAggregate())
			if tt.Shared {
				g.Expect(err.Error()).To(ContainSubstring(tt.Message), "the API server must say what knest says")
			}
		})
	}
}

// TestManifestQuantitiesMatchTheAPIServer holds validation.Quantities (what `knest
// create -f` checks before decoding) and the CRD's isQuantity rules to the same cases
// and the same message, which names the field and gives an example.
func TestManifestQuantitiesMatchTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	for i, tt := range validationtest.ManifestCases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			obj := validationtest.ValidContent()
			tt.Set(obj)
			u := &unstructured.Unstructured{Object: obj}
			u.SetNamespace(ns)
			u.SetName(fmt.Sprintf("manifest-%d", i))
			local := validation.Quantities(u.Object)
			err := env.Client.Create(t.Context(), u)
			if tt.Message == "" {
				g.Expect(local).To(BeEmpty())
				g.Expect(err).NotTo(HaveOccurred(), "the API server must accept what knest accepts")
				return
			}
			g.Expect(local.ToAggregate()).To(MatchError(ContainSubstring(tt.Field + ": Invalid value")))
			g.Expect(local.ToAggregate()).To(MatchError(ContainSubstring(tt.Message)))
			g.Expect(err).To(MatchError(ContainSubstring(tt.Field+": ")), "the API server must name the field")
			g.Expect(err).To(MatchError(ContainSubstring(tt.Message)), "the API server must say what knest says")
			g.Expect(err.Error()).NotTo(ContainSubstring("regular expression"), "the message must not quote a pattern")
			g.Expect(err.Error()).NotTo(ContainSubstring("should match"), "the message must not quote a pattern")
		})
	}
}

// TestUpdateValidationMatchesTheAPIServer holds the CRD's transition rules (versions
// forward, one minor at a time, pools never back) and validation.Update to the same
// cases.
func TestUpdateValidationMatchesTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	for i, tt := range validationtest.UpdateCases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			old := validationtest.Valid()
			old.Namespace, old.Name = ns, fmt.Sprintf("update-%d", i)
			tt.Old(old)
			g.Expect(env.Client.Create(t.Context(), old)).To(Succeed())
			nc := old.DeepCopy()
			tt.New(nc)
			local := validation.Update(old, nc)
			err := env.Client.Update(t.Context(), nc)
			if tt.Message == "" {
				g.Expect(local).To(BeEmpty())
				g.Expect(err).NotTo(HaveOccurred(), "the API server must accept what knest accepts")
				return
			}
			g.Expect(local.ToAggregate()).To(MatchError(ContainSubstring(tt.Message)))
			g.Expect(err).To(MatchError(ContainSubstring(tt.Message)), "the API server must say what knest says")
		})
	}
}
