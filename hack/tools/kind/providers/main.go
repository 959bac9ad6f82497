// Command providers writes the Cluster API core, kubeadm bootstrap, kubeadm
// control-plane and CAPK components that `make e2e` installs in the kind host
// cluster with `kubectl apply --server-side`: what `clusterctl init` would install,
// made offline and without cert-manager.
//
// For each provider it:
//
//   - builds the module's config/default with kustomize, in-process (CAPI's and
//     CAPK's release components YAML are that build), from the module versions this
//     tools module pins (go.mod);
//   - sets every manager container's image to <registry>/<name>:<module version>
//     with imagePullPolicy IfNotPresent, after the build (CAPI's release sets its
//     image and IfNotPresent through the manager_image_patch.yaml and
//     manager_pull_policy.yaml patches; CAPK's release sets its image and keeps
//     Always, which would pull from outside here);
//   - runs clusterctl's own processing (repository.NewComponents, as `clusterctl
//     init` does with no clusterctl.yaml and no environment variables): every
//     ${VAR:=default} gets its default, a variable without default is an error; the
//     target namespace is the one the components declare (capi-system,
//     capi-kubeadm-bootstrap-system, capi-kubeadm-control-plane-system,
//     capk-system); every object gets the labels clusterctl.cluster.x-k8s.io and
//     cluster.x-k8s.io/provider=<cluster-api|bootstrap-kubeadm|
//     control-plane-kubeadm|infrastructure-kubevirt>, and the objects are ordered
//     as clusterctl creates them (Namespace first);
//   - does what cert-manager would: drops the Issuer and Certificate objects, writes
//     a kubernetes.io/tls Secret named by the Certificate's spec.secretName (the one
//     the Deployment mounts) with a serving certificate for the Certificate's DNS
//     names (<webhook-service>.<namespace>.svc and .svc.cluster.local) signed by a
//     CA made here, and, in place of cert-manager's cainjector, sets that CA as the
//     caBundle of every webhook of the webhook configurations and of the conversion
//     webhook of every CRD annotated cert-manager.io/inject-ca-from (the annotation
//     is removed).
//
// Output, in -out:
//
//	components.yaml  clusterctl's inventory CRD, then the components of cluster-api,
//	                 bootstrap-kubeadm, control-plane-kubeadm and
//	                 infrastructure-kubevirt, in clusterctl's install order; no object
//	                 of a kind it defines, so one apply takes it whole
//	inventory.yaml   clusterctl's inventory entries (Provider objects), to apply once
//	                 the inventory CRD is Established; nothing but clusterctl itself
//	                 (move, upgrade, describe) reads them
//	ca.crt           the CA of every webhook serving certificate
//
// Install with:
//
//	kubectl apply --server-side -f OUT/components.yaml
//	kubectl wait --for=condition=Established crd/providers.clusterctl.cluster.x-k8s.io
//	kubectl apply --server-side -f OUT/inventory.yaml
//
// Every run makes a new CA and new serving certificates.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "", "directory to write the components to (created if missing)")
	registry := flag.String("registry", defaultRegistry, "registry of the manager images: <registry>/<image>:<module version>")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: providers -out DIR [-registry knest.local]")
		os.Exit(2)
	}
	if err := run(context.Background(), *out, *registry); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
		os.Exit(1)
	}
}
