package cluster

import (
	_ "embed"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/knest-dev/knest/pkg/hosted"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// etcdDisk is the volume a VM control plane keeps etcd on; nil when the spec wants
// etcd on the VMs' root disks.
func (r renderer) etcdDisk() *vmtemplate.EtcdDisk {
	e := r.nc.Spec.ControlPlane.Etcd
	if r.nc.Spec.ControlPlane.IsHosted() || e.Ephemeral {
		return nil
	}
	d := &vmtemplate.EtcdDisk{Size: hosted.DefaultEtcdVolume, StorageClassName: e.StorageClassName}
	if e.Size != nil {
		d.Size = *e.Size
	}
	return d
}

// etcdDiskScript mounts a VM control plane's etcd disk; see the script.
//
//go:embed scripts/etcd-disk.sh
var etcdDiskScript string

const etcdDiskPath = "/usr/local/sbin/knest-etcd-disk"

// etcdDiskMount is the script as a bootstrap file and the preKubeadmCommand that
// runs it.
func etcdDiskMount() (bootstrapv1.File, string) {
	return bootstrapv1.File{Path: etcdDiskPath, Owner: "root:root", Permissions: "0755", Content: etcdDiskScript}, etcdDiskPath
}
