//go:build e2e

package tenant_test

// agnhostImage is Kubernetes' own e2e test image (k8s.io/kubernetes/test/images/agnhost,
// whose webhook subcommand serves AdmissionReview over TLS) as every tenant node image
// of that Kubernetes version preloads it (images/build.sh); nothing is pulled.
func agnhostImage(version string) string { return "knest.local/agnhost:" + version }
