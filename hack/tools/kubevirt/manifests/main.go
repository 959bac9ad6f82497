// Command manifests writes KubeVirt objects that knest's tests install, produced by
// the same generator virt-operator uses, so they match a real KubeVirt of the pinned
// version:
//
//	-crds DIR     the VirtualMachine and VirtualMachineInstance CRDs (the integration
//	              test bed, `make testbin`);
//	-install DIR  what virt-api and virt-controller need to run against a bare API
//	              server (`make kubevirt`): every CRD virt-operator installs, the
//	              KubeVirt CRD, and virt-api's mutating and validating webhook
//	              configurations for namespace kubevirt (clientConfig still names the
//	              virt-api Service; e2e/kubevirt points it at the process), and the
//	              ServiceAccount and RBAC of each component (rbac-<component>.yaml).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/rbac"
	"sigs.k8s.io/yaml"
)

// installNamespace is where virt-operator installs KubeVirt by default.
const installNamespace = "kubevirt"

func main() {
	crds := flag.String("crds", "", "directory to write the VirtualMachine and VirtualMachineInstance CRDs to")
	install := flag.String("install", "", "directory to write every KubeVirt CRD and virt-api's webhook configurations to")
	flag.Parse()
	if *crds == "" && *install == "" {
		fmt.Fprintln(os.Stderr, "ERROR: -crds or -install is required")
		os.Exit(2)
	}
	if err := run(*crds, *install); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
		os.Exit(1)
	}
}

func run(crdDir, installDir string) error {
	if crdDir != "" {
		if err := writeCRDs(crdDir, components.NewVirtualMachineCrd, components.NewVirtualMachineInstanceCrd); err != nil {
			return err
		}
	}
	if installDir == "" {
		return nil
	}
	// The list of install.GenerateCurrentInstallStrategy, plus the KubeVirt CRD that
	// virt-operator's own manifest installs.
	if err := writeCRDs(installDir,
		components.NewKubeVirtCrd,
		components.NewVirtualMachineInstanceCrd, components.NewPresetCrd, components.NewReplicaSetCrd,
		components.NewVirtualMachineCrd, components.NewVirtualMachineInstanceMigrationCrd,
		components.NewVirtualMachineSnapshotCrd, components.NewVirtualMachineSnapshotContentCrd,
		components.NewVirtualMachineRestoreCrd, components.NewVirtualMachineInstancetypeCrd,
		components.NewVirtualMachineClusterInstancetypeCrd, components.NewVirtualMachinePoolCrd,
		components.NewMigrationPolicyCrd, components.NewVirtualMachinePreferenceCrd,
		components.NewVirtualMachineClusterPreferenceCrd, components.NewVirtualMachineExportCrd,
		components.NewVirtualMachineCloneCrd,
	); err != nil {
		return err
	}
	for name, objs := range map[string][]runtime.Object{
		"webhook-mutating.yaml":     {components.NewVirtAPIMutatingWebhookConfiguration(installNamespace)},
		"webhook-validating.yaml":   {components.NewVirtAPIValidatingWebhookConfiguration(installNamespace)},
		"rbac-virt-api.yaml":        rbac.GetAllApiServer(installNamespace),
		"rbac-virt-controller.yaml": rbac.GetAllController(installNamespace),
	} {
		if err := write(filepath.Join(installDir, name), objs...); err != nil {
			return err
		}
	}
	return nil
}

func writeCRDs(dir string, newCRDs ...func() (*extv1.CustomResourceDefinition, error)) error {
	// NewXCrd already attaches the generated OpenAPI schema (patchValidation).
	for _, newCRD := range newCRDs {
		crd, err := newCRD()
		if err != nil {
			return fmt.Errorf("failed to generate CRD: %w", err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return fmt.Errorf("CRD %s version %s has no OpenAPI schema", crd.Name, v.Name)
			}
		}
		if err := write(filepath.Join(dir, crd.Name+".yaml"), crd); err != nil {
			return err
		}
	}
	return nil
}

// write writes objs as YAML documents, without the empty status and
// creationTimestamp typed objects always carry, as KubeVirt's own
// tools/util.MarshallObject does.
func write(path string, objs ...runtime.Object) error {
	var out []byte
	for i, obj := range objs {
		j, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := json.Unmarshal(j, &u.Object); err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("failed to marshal %s: %w", filepath.Base(path), err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
