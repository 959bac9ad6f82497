package knest

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/validation"
)

// Validate checks nc against the rules the NestedCluster CRD enforces and returns one
// error listing every problem, or nil.
func Validate(nc *knestv1.NestedCluster) error {
	errs := validation.NestedCluster(nc)
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return &InvalidError{Name: nc.Name, Problems: msgs}
}

// InvalidError lists what is wrong with a NestedCluster.
type InvalidError struct {
	Name     string
	Problems []string
}

func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("invalid cluster %s: %s", e.Name, e.Problems[0])
	}
	return fmt.Sprintf("invalid cluster %s:\n  - %s", e.Name, strings.Join(e.Problems, "\n  - "))
}

// IsInvalid reports whether err is (or wraps) an InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

type objectsOptions struct {
	graph         bool
	renderOptions cluster.Options
}

// ObjectsOption configures Objects.
type ObjectsOption func(*objectsOptions)

// ObjectsWithGraph adds the Cluster API objects the controller would create, rendered
// with opts.
func ObjectsWithGraph(opts cluster.Options) ObjectsOption {
	return func(o *objectsOptions) {
		o.graph = true
		o.renderOptions = opts
	}
}

// Objects returns what creating nc amounts to, without a cluster: nc validated and
// defaulted as the API server would, and with ObjectsWithGraph every object the
// controller renders for it. nc is not modified.
func Objects(nc *knestv1.NestedCluster, opts ...ObjectsOption) ([]client.Object, error) {
	var o objectsOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := Validate(nc); err != nil {
		return nil, err
	}
	nc = nc.DeepCopy()
	cluster.Default(nc)
	nc.APIVersion = knestv1.GroupVersion.String()
	nc.Kind = "NestedCluster"
	objs := []client.Object{nc}
	if !o.graph {
		return objs, nil
	}
	g, err := cluster.Render(nc, o.renderOptions)
	if err != nil {
		return nil, fmt.Errorf("failed to render the Cluster API objects of cluster %s: %w", nc.Name, err)
	}
	return append(objs, g.Objects()...), nil
}
