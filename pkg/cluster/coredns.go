package cluster

import "github.com/knest-dev/knest/pkg/kubever"

// CoreDNS as kubeadm deploys it for each Kubernetes minor knest builds node images for
// (kubeadm's constants.CoreDNSVersion). images/build.sh preloads every tag listed
// here on every node image and `make node-image` checks it, so keep one line per
// minor in this form.
//
// The KubeadmControlPlane names it (ClusterConfiguration.dns.imageTag): Cluster API
// keeps the CoreDNS a cluster runs unless told another (v1.34's is v1.12.1, v1.35's
// v1.13.1). Told, it moves CoreDNS (and its Corefile) once every control-plane
// machine is at the new version; until then the kubeadm-config ConfigMap names the
// old tag, which a new control-plane node's `kubeadm join` pulls, hence every image
// carries every minor's CoreDNS.
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
