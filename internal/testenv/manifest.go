package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates the objects of a manifest in knest's tree (path relative to the
// module root, e.g. config/admission/node_versions_policy.yaml), as `kubectl create
// -f` would. mutate, when not nil, may change each object before it is created.
func (e *Env) Apply(ctx context.Context, path string, mutate func(*unstructured.Unstructured)) ([]*unstructured.Unstructured, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if mutate != nil {
			mutate(u)
		}
		if err := e.Client.Create(ctx, u); err != nil {
			return nil, fmt.Errorf("failed to create %s %s from %s: %w", u.GetKind(), u.GetName(), path, err)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s holds no objects", path)
	}
	return objs, nil
}
