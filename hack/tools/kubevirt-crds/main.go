// Command kubevirt-crds writes the KubeVirt CRDs that knest's integration tests need,
// produced by the same generator virt-operator uses to install them, so the schemas
// (including the OpenAPI validation) match a real KubeVirt of the pinned version.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("out", "", "directory to write the CRD YAML files to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "ERROR: -out is required")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// NewXCrd already attaches the generated OpenAPI schema (patchValidation).
	for _, newCRD := range []func() (*extv1.CustomResourceDefinition, error){
		components.NewVirtualMachineCrd,
		components.NewVirtualMachineInstanceCrd,
	} {
		crd, err := newCRD()
		if err != nil {
			return fmt.Errorf("failed to generate CRD: %w", err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return fmt.Errorf("CRD %s version %s has no OpenAPI schema", crd.Name, v.Name)
			}
		}
		b, err := marshal(crd)
		if err != nil {
			return fmt.Errorf("failed to marshal CRD %s: %w", crd.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, crd.Name+".yaml"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// marshal drops the empty status and creationTimestamp the typed object always
// carries, as KubeVirt's own tools/util.MarshallObject does.
func marshal(crd *extv1.CustomResourceDefinition) ([]byte, error) {
	j, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var u unstructured.Unstructured
	if err := json.Unmarshal(j, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return yaml.Marshal(u.Object)
}
