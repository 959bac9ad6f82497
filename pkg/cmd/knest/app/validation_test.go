package app_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

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
