// Tools module: the Cluster API core, kubeadm bootstrap and kubeadm control-plane
// managers, built by `make providers` (hack/providers.mk) for the end-to-end tests.
// Nothing but sigs.k8s.io/cluster-api is required here, so the build list is the one
// CAPI's own go.mod pins (k8s v0.33, controller-runtime v0.21): the binaries are
// built from the same dependencies as the released images. CAPK lives in ../capk for
// the same reason (it needs k8s v0.34 and controller-runtime v0.22).
module github.com/knest-dev/knest/hack/tools/providers/capi

go 1.24.0

require sigs.k8s.io/cluster-api v1.11.4
