package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Quantities checks the quantity fields of a NestedCluster given as unstructured
// content, e.g. a manifest before it is decoded. A typed NestedCluster cannot hold a
// quantity that does not parse, and the decoder's own error quotes a regular
// expression and names no field; this names the field and gives an example, with the
// CRD's message.
func Quantities(obj map[string]any) field.ErrorList {
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return nil
	}
	path := field.NewPath("spec")
	var errs field.ErrorList
	if cp, ok := spec["controlPlane"].(map[string]any); ok {
		errs = append(errs, machineQuantities(cp, path.Child("controlPlane"))...)
	}
	pools, _ := spec["workers"].([]any)
	for i, p := range pools {
		if pool, ok := p.(map[string]any); ok {
			errs = append(errs, machineQuantities(pool, path.Child("workers").Index(i))...)
		}
	}
	return errs
}

func machineQuantities(m map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v, ok := m["memory"]; ok && !isQuantity(v) {
		errs = append(errs, field.Invalid(path.Child("memory"), v, MemoryQuantityMessage))
	}
	if rd, ok := m["rootDisk"].(map[string]any); ok {
		if v, ok := rd["size"]; ok && !isQuantity(v) {
			errs = append(errs, field.Invalid(path.Child("rootDisk", "size"), v, DiskSizeQuantityMessage))
		}
	}
	return errs
}

// isQuantity is CEL's isQuantity on an int-or-string value: a string that
// resource.ParseQuantity takes, or a whole number.
func isQuantity(v any) bool {
	switch v := v.(type) {
	case string:
		_, err := resource.ParseQuantity(v)
		return err == nil
	case int, int32, int64:
		return true
	case float64: // JSON numbers
		_, err := resource.ParseQuantity(fmt.Sprint(v))
		return err == nil && v == float64(int64(v))
	}
	return false
}
