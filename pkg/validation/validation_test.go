package validation

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/pkg/validation/validationtest"
)

func TestNestedCluster(t *testing.T) {
	for _, tt := range validationtest.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			nc := validationtest.Valid()
			tt.Mutate(nc)
			before := nc.DeepCopy()
			errs := NestedCluster(nc)
			g.Expect(nc).To(Equal(before), "validation must not modify its input")
			if tt.Message == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).NotTo(BeEmpty())
			g.Expect(errs.ToAggregate().Error()).To(And(ContainSubstring(tt.Field), ContainSubstring(tt.Message)))
		})
	}
}

func TestUpdate(t *testing.T) {
	for _, tt := range validationtest.UpdateCases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			old := validationtest.Valid()
			tt.Old(old)
			nc := old.DeepCopy()
			tt.New(nc)
			errs := Update(old, nc)
			if tt.Message == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate().Error()).To(And(ContainSubstring(tt.Field), ContainSubstring(tt.Message)))
		})
	}
}

func TestQuantities(t *testing.T) {
	for _, tt := range validationtest.ManifestCases {
		t.Run(tt.Name, func(t *testing.T) {
			g := NewWithT(t)
			obj := validationtest.ValidContent()
			tt.Set(obj)
			errs := Quantities(obj)
			if tt.Message == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate()).To(MatchError(And(ContainSubstring(tt.Field+": "), ContainSubstring(tt.Message))))
		})
	}
}
