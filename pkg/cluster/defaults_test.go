package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/pkg/cluster"
)

func TestDefaultIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	a := demo()
	b := a.DeepCopy()
	cluster.Default(b)
	g.Expect(b).To(Equal(a))
}
