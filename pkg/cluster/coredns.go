package cluster

import "github.com/knest-dev/knest/pkg/kubever"

// CoreDNS as kubeadm deploys it for each Kubernetes minor knest builds node images for
// (kubeadm's constants.CoreDNSVersion, preloaded on that node image; `make
// node-image` checks the image against this list, so keep one line per minor in
// this form).
//
// The KubeadmControlPlane names it (ClusterConfiguration.dns.imageTag): Cluster API
// keeps the CoreDNS a cluster runs unless told another, and the node image of the
// next minor has only its own CoreDNS preloaded (v1.34's is v1.12.1, v1.35's
// v1.13.1), so after an upgrade CoreDNS could not start on the new nodes of an
// air-gapped tenant. Told, Cluster API rolls CoreDNS (and its Corefile) along.
const (
	coreDNSv134 = "v1.12.1"
	coreDNSv135 = "v1.13.1"
)

var coreDNSImageTags = map[int]string{34: coreDNSv134, 35: coreDNSv135}

// CoreDNSImageTag is the CoreDNS image tag for a Kubernetes version, "" for a minor
// knest has no node image for (kubeadm's default then).
func CoreDNSImageTag(version string) string {
	v, err := kubever.Parse(version)
	if err != nil {
		return ""
	}
	return coreDNSImageTags[v.Minor]
}
