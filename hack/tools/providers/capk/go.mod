// Tools module: the Cluster API Provider KubeVirt manager, built by `make providers`
// (hack/providers.mk) for the end-to-end tests, from the dependencies CAPK's own
// go.mod pins. See ../capi/go.mod for why the providers do not share one module.
module github.com/knest-dev/knest/hack/tools/providers/capk

go 1.24.0

require sigs.k8s.io/cluster-api-provider-kubevirt v0.11.2
