// Package printers writes NestedClusters and rendered objects for people (tables,
// descriptions) and for programs (YAML, JSON), always to the writer it is given, so
// commands send data to stdout.
package printers

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// Output formats.
const (
	YAML = "yaml"
	JSON = "json"
	Name = "name"
)

// Objects writes objs as YAML or JSON. Each object gets its apiVersion and kind from
// scheme; empty status, a null creationTimestamp and managedFields are left out, so
// the output reads like a manifest. As a list (asList, or several objects in JSON)
// they are wrapped in a v1 List; otherwise YAML documents are separated by "---".
func Objects(w io.Writer, format string, objs []client.Object, asList bool, scheme *runtime.Scheme) error {
	items := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		m, err := manifest(o, scheme)
		if err != nil {
			return err
		}
		items = append(items, m)
	}
	var doc any
	if asList || (format == JSON && len(items) != 1) {
		doc = map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items}
	}
	switch format {
	case JSON:
		if doc == nil {
			doc = items[0]
		}
		raw, err := json.MarshalIndent(doc, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	case YAML:
		if doc != nil {
			return writeYAML(w, doc)
		}
		for i, item := range items {
			if i > 0 {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			if err := writeYAML(w, item); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unsupported output format %q", format)
}

func writeYAML(w io.Writer, doc any) error {
	raw, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(raw)
	return err
}

// manifest turns o into a map with apiVersion and kind, without the noise of
// unset server-side fields.
func manifest(o client.Object, scheme *runtime.Scheme) (map[string]any, error) {
	gvk, err := apiutil.GVKForObject(o, scheme)
	if err != nil {
		return nil, fmt.Errorf("failed to find the kind of %T: %w", o, err)
	}
	o = o.DeepCopyObject().(client.Object)
	o.GetObjectKind().SetGroupVersionKind(gvk)
	o.SetManagedFields(nil)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if md["creationTimestamp"] == nil {
			delete(md, "creationTimestamp")
		}
	}
	if st, ok := m["status"]; ok && onlyZero(st) {
		delete(m, "status")
	}
	return m, nil
}

// onlyZero reports whether v holds nothing but zero values (an unset status).
func onlyZero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range t {
			if !onlyZero(x) {
				return false
			}
		}
		return true
	case []any:
		return len(t) == 0
	case string:
		return t == ""
	case bool:
		return !t
	case int64:
		return t == 0
	case float64:
		return t == 0
	}
	return false
}
