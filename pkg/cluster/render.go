// Package cluster renders a NestedCluster into the Cluster API object graph that
// realizes it. Rendering is a pure function: the controller applies its result and
// `knest create --dry-run` prints it.
package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/autoscaler"
	"github.com/knest-dev/knest/pkg/ccm"
	"github.com/knest-dev/knest/pkg/csi/deploy"
	"github.com/knest-dev/knest/pkg/csi/startuptaint"
	"github.com/knest-dev/knest/pkg/hosted"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// Bootstrap check strategies of CAPK.
const (
	// BootstrapCheckSSH is CAPK's default: its controller logs into the VM over SSH to
	// read Cluster API's bootstrap sentinel file.
	BootstrapCheckSSH = "ssh"
	// BootstrapCheckNone trusts the VM's readiness alone; for hosts where the CAPK
	// controller cannot reach VM IPs.
	BootstrapCheckNone = "none"
)

// ManagedBy is the value of Cluster API's managed-by annotation on the
// KubevirtCluster of a hosted control plane.
const ManagedBy = "knest"

// NoKernelBoot as Options.NodeKernelRepository: the default node images boot from
// their own bootloader.
const NoKernelBoot = "none"

// criSocket is containerd's socket in knest's node image.
const criSocket = "unix:///var/run/containerd/containerd.sock"

// Options are controller-wide rendering settings.
type Options struct {
	// NodeImageRepository is used for pools that do not name an image; the tag is the
	// tenant Kubernetes version.
	NodeImageRepository string
	// NodeKernelRepository holds the kernel-boot images of NodeImageRepository's
	// disks, tagged alike: pools that name neither an image nor a kernelBoot boot
	// their kernel from it. NoKernelBoot turns this off, for node images with a
	// bootloader.
	NodeKernelRepository string
	// BootstrapCheck is CAPK's virtualMachineBootstrapCheck strategy: ssh or none.
	BootstrapCheck string
	// CPUAllocationRatio is the host CPU overcommit of tenant VMs (vmtemplate.Input).
	CPUAllocationRatio int
	// NodeStartupTimeout is how long a machine may go without a Node before its health
	// check replaces it (default DefaultNodeStartupTimeout). How fast a VM boots and
	// joins is the host's property, so it is set per controller, not per cluster.
	NodeStartupTimeout time.Duration
	// AutoscalerImage runs the tenants' cluster-autoscalers (autoscaler.DefaultImage
	// when empty).
	AutoscalerImage string
	// ProviderImage is the knest image, whose `knest cloud-controller-manager` each
	// tenant's load-balancer provider runs.
	ProviderImage string
	// CSIImages run the tenants' CSI drivers (pkg/csi/deploy's defaults when
	// empty). The driver's image must be the one the node images preload.
	CSIImages deploy.Images
}

// DefaultNodeStartupTimeout: a nested VM that has not joined in 20 minutes is taken to
// be stuck; slower hosts (software emulation) set a longer one.
const DefaultNodeStartupTimeout = 20 * time.Minute

func (o Options) withDefaults() Options {
	setIfEmpty(&o.NodeImageRepository, knestv1.DefaultNodeImageRepository)
	setIfEmpty(&o.NodeKernelRepository, knestv1.DefaultNodeKernelRepository)
	setIfEmpty(&o.BootstrapCheck, BootstrapCheckSSH)
	if o.NodeStartupTimeout <= 0 {
		o.NodeStartupTimeout = DefaultNodeStartupTimeout
	}
	return o
}

// Graph is the Cluster API object graph of one NestedCluster.
type Graph struct {
	Cluster                 *clusterv1.Cluster
	KubevirtCluster         *capkv1.KubevirtCluster
	ControlPlaneTemplate    *capkv1.KubevirtMachineTemplate
	ControlPlane            *controlplanev1.KubeadmControlPlane
	ControlPlaneHealthCheck *clusterv1.MachineHealthCheck
	// HostedControlPlane replaces the four above when spec.controlPlane.mode is
	// Hosted.
	HostedControlPlane *hcpv1.HostedControlPlane
	Pools              []Pool
	// CNI is nil when spec.network.cni is none.
	CNI          *addonsv1.ClusterResourceSet
	CNIConfigMap *corev1.ConfigMap
	// Isolation fences the cluster's VMs off from other tenants and the host.
	Isolation *networkingv1.NetworkPolicy
	// Autoscaler sizes the autoscaled pools; nil when no pool is.
	Autoscaler *autoscaler.Objects
	// CloudControllerManager gives the tenant's LoadBalancer Services host load
	// balancers; nil when spec.providers.loadBalancer.disabled.
	CloudControllerManager *ccm.Objects
	// Storage is the tenant's CSI driver: its controller on the host, and the
	// ClusterResourceSet that applies its tenant half (CSIDriver, node DaemonSet,
	// StorageClasses) from StorageConfigMap. All nil when
	// spec.providers.storage.disabled.
	Storage          *deploy.HostObjects
	StorageConfigMap *corev1.ConfigMap
	StorageCRS       *addonsv1.ClusterResourceSet
}

// Pool is the objects of one worker pool.
type Pool struct {
	Name              string
	MachineTemplate   *capkv1.KubevirtMachineTemplate
	BootstrapTemplate *bootstrapv1.KubeadmConfigTemplate
	MachineDeployment *clusterv1.MachineDeployment
	HealthCheck       *clusterv1.MachineHealthCheck
}

// Objects lists every object in the order a person reads them and a fresh apply
// creates them (the network policy before any VM, templates before what references
// them).
func (g *Graph) Objects() []client.Object {
	objs := []client.Object{g.Isolation, g.Cluster, g.KubevirtCluster}
	if g.HostedControlPlane != nil {
		objs = append(objs, g.HostedControlPlane)
	} else {
		objs = append(objs, g.ControlPlaneTemplate, g.ControlPlane, g.ControlPlaneHealthCheck)
	}
	for _, p := range g.Pools {
		objs = append(objs, p.MachineTemplate, p.BootstrapTemplate, p.MachineDeployment, p.HealthCheck)
	}
	if g.CNI != nil {
		objs = append(objs, g.CNIConfigMap, g.CNI)
	}
	if g.Autoscaler != nil {
		objs = append(objs, g.Autoscaler.List()...)
	}
	if g.CloudControllerManager != nil {
		objs = append(objs, g.CloudControllerManager.List()...)
	}
	if g.Storage != nil {
		objs = append(objs, g.Storage.List()...)
		objs = append(objs, g.StorageConfigMap, g.StorageCRS)
	}
	return objs
}

// Render returns the object graph for nc. nc must be defaulted (by the API server or
// Default); Render does not modify it.
func Render(nc *knestv1.NestedCluster, opts Options) (*Graph, error) {
	opts = opts.withDefaults()
	r := renderer{nc: nc, opts: opts, name: nc.Name, ns: nc.Namespace}
	g := &Graph{
		Isolation:       r.isolation(),
		Cluster:         r.cluster(),
		KubevirtCluster: r.kubevirtCluster(),
	}
	var err error
	if nc.Spec.ControlPlane.IsHosted() {
		g.HostedControlPlane = r.hostedControlPlane()
	} else {
		if g.ControlPlaneTemplate, err = r.machineTemplate(knestv1.ControlPlanePool, ControlPlaneName(r.name), nc.Spec.Version, nc.Spec.ControlPlane.MachineSpec, nil, nil, r.etcdDisk()); err != nil {
			return nil, fmt.Errorf("failed to render control-plane machine template: %w", err)
		}
		g.ControlPlane = r.controlPlane(g.ControlPlaneTemplate.Name)
		g.ControlPlaneHealthCheck = r.healthCheck(ControlPlaneName(r.name), knestv1.ControlPlanePool, nc.Spec.ControlPlane.Replicas,
			metav1.LabelSelector{MatchLabels: map[string]string{
				clusterv1.ClusterNameLabel:         r.name,
				clusterv1.MachineControlPlaneLabel: "",
			}})
	}
	for _, pool := range nc.Spec.Workers {
		p, err := r.pool(pool)
		if err != nil {
			return nil, fmt.Errorf("failed to render worker pool %s: %w", pool.Name, err)
		}
		g.Pools = append(g.Pools, p)
	}
	if nc.Spec.Network.CNI == knestv1.CNIFlannel {
		if g.CNIConfigMap, err = r.flannelConfigMap(); err != nil {
			return nil, fmt.Errorf("failed to render the flannel CNI manifest: %w", err)
		}
		g.CNI = r.clusterResourceSet(CNIName(r.name), g.CNIConfigMap.Name, addonsv1.ClusterResourceSetStrategyApplyOnce)
	}
	g.Autoscaler = r.autoscaler(g.Pools)
	if !nc.Spec.Providers.LoadBalancer.Disabled {
		g.CloudControllerManager = ccm.Render(ccm.Input{
			Cluster: r.name, Namespace: r.ns, Image: r.opts.ProviderImage,
			KubeconfigSecret: KubeconfigSecretName(r.name),
			Labels:           r.meta("", "").Labels,
		})
	}
	if !nc.Spec.Providers.Storage.Disabled {
		if err := r.storage(g); err != nil {
			return nil, fmt.Errorf("failed to render the CSI driver: %w", err)
		}
	}
	return g, nil
}

// autoscaler renders the tenant's cluster-autoscaler when a pool is autoscaled.
func (r renderer) autoscaler(pools []Pool) *autoscaler.Objects {
	var scaled []string
	for i, p := range r.nc.Spec.Workers {
		if Autoscaled(p) {
			scaled = append(scaled, pools[i].MachineDeployment.Name)
		}
	}
	if len(scaled) == 0 {
		return nil
	}
	return autoscaler.Render(autoscaler.Input{
		Cluster: r.name, Namespace: r.ns, Image: r.opts.AutoscalerImage,
		MachineDeployments: scaled,
		KubeconfigSecret:   KubeconfigSecretName(r.name),
		Spec:               r.nc.Spec.Autoscaler,
		Labels:             r.meta("", "").Labels,
	})
}

type renderer struct {
	nc   *knestv1.NestedCluster
	opts Options
	name string
	ns   string
}

// meta is the metadata every rendered object carries: the NestedCluster's label
// (so the controller finds what it owns) and the pool it belongs to.
func (r renderer) meta(name, pool string) metav1.ObjectMeta {
	labels := map[string]string{
		knestv1.ClusterNameLabel:   r.name,
		clusterv1.ClusterNameLabel: r.name,
	}
	if pool != "" {
		labels[knestv1.PoolNameLabel] = pool
	}
	return metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels}
}

func (r renderer) cluster() *clusterv1.Cluster {
	s := r.nc.Spec
	c := &clusterv1.Cluster{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("Cluster")),
		ObjectMeta: r.meta(r.name, ""),
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{s.Network.PodCIDR}},
				Services:      clusterv1.NetworkRanges{CIDRBlocks: []string{s.Network.ServiceCIDR}},
				ServiceDomain: s.Network.DNSDomain,
			},
			ControlPlaneRef: r.controlPlaneRef(),
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: capkv1.GroupVersion.Group,
				Kind:     "KubevirtCluster",
				Name:     r.name,
			},
		},
	}
	if s.Paused {
		c.Spec.Paused = ptr(true)
	}
	return c
}

func (r renderer) controlPlaneRef() clusterv1.ContractVersionedObjectReference {
	if r.nc.Spec.ControlPlane.IsHosted() {
		return clusterv1.ContractVersionedObjectReference{APIGroup: hcpv1.GroupVersion.Group, Kind: "HostedControlPlane", Name: ControlPlaneName(r.name)}
	}
	return clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: ControlPlaneName(r.name)}
}

func (r renderer) kubevirtCluster() *capkv1.KubevirtCluster {
	api := r.nc.Spec.APIServer
	kc := &capkv1.KubevirtCluster{
		TypeMeta:   typeMeta(capkv1.GroupVersion.WithKind("KubevirtCluster")),
		ObjectMeta: r.meta(r.name, ""),
		Spec: capkv1.KubevirtClusterSpec{
			ControlPlaneServiceTemplate: capkv1.ControlPlaneServiceTemplate{
				Spec: capkv1.ServiceSpecTemplate{Type: corev1.ServiceType(api.ServiceType)},
			},
		},
	}
	if r.nc.Spec.ControlPlane.IsHosted() {
		// The HostedControlPlane serves the endpoint; CAPK then makes no Service and
		// no SSH keys (workers use BootstrapCheckNone), and knest marks the
		// KubevirtCluster ready, as Kamaji's provider does.
		kc.Annotations = map[string]string{clusterv1.ManagedByAnnotation: ManagedBy}
		return kc
	}
	// A fixed host wins over what CAPK derives from its Service (CAPK's rule).
	if api.Host != "" {
		kc.Spec.ControlPlaneEndpoint = capkv1.APIEndpoint{Host: api.Host, Port: 6443}
	}
	return kc
}

func (r renderer) machineTemplate(pool, base, version string, m knestv1.MachineSpec, gpus, hostDevices []knestv1.DeviceSpec, etcdDisk *vmtemplate.EtcdDisk) (*capkv1.KubevirtMachineTemplate, error) {
	spec := capkv1.KubevirtMachineTemplateSpec{Template: capkv1.KubevirtMachineTemplateResource{Spec: capkv1.KubevirtMachineSpec{
		VirtualMachineTemplate: vmtemplate.Build(vmtemplate.Input{
			ClusterName: r.name,
			Pool:        pool,
			Machine:     r.withKernelBoot(m, version),
			Image:       r.image(m, version),
			GPUs:        gpus,
			HostDevices: hostDevices,
			EtcdDisk:    etcdDisk,

			CPUAllocationRatio: r.opts.CPUAllocationRatio,
		}),
		BootstrapCheckSpec: capkv1.VirtualMachineBootstrapCheckSpec{CheckStrategy: r.bootstrapCheck()},
	}}}
	name, err := hashedName(base, spec)
	if err != nil {
		return nil, err
	}
	return &capkv1.KubevirtMachineTemplate{
		TypeMeta:   typeMeta(capkv1.GroupVersion.WithKind("KubevirtMachineTemplate")),
		ObjectMeta: r.meta(name, pool),
		Spec:       spec,
	}, nil
}

// bootstrapCheck is the controller's strategy, except for the workers of a hosted
// control plane: CAPK makes no SSH keys for an externally managed KubevirtCluster.
func (r renderer) bootstrapCheck() string {
	if r.nc.Spec.ControlPlane.IsHosted() {
		return BootstrapCheckNone
	}
	return r.opts.BootstrapCheck
}

// hostedControlPlane is the control plane as pods on the host (pkg/hosted).
func (r renderer) hostedControlPlane() *hcpv1.HostedControlPlane {
	s := r.nc.Spec
	hcp := &hcpv1.HostedControlPlane{
		TypeMeta:   typeMeta(hcpv1.GroupVersion.WithKind("HostedControlPlane")),
		ObjectMeta: r.meta(ControlPlaneName(r.name), knestv1.ControlPlanePool),
		Spec: hcpv1.HostedControlPlaneSpec{
			Version:  s.Version,
			Replicas: ptr(s.ControlPlane.Replicas),
			Service:  hcpv1.ServiceSpec{Type: corev1.ServiceType(s.APIServer.ServiceType), Host: s.APIServer.Host, CertSANs: slices.Clone(s.APIServer.CertSANs)},
			Network:  hcpv1.NetworkSpec{PodCIDR: s.Network.PodCIDR, ServiceCIDR: s.Network.ServiceCIDR, DNSDomain: s.Network.DNSDomain},
			Etcd: hcpv1.EtcdSpec{Members: max(1, s.ControlPlane.Etcd.Members), StorageClassName: s.ControlPlane.Etcd.StorageClassName,
				Size: s.ControlPlane.Etcd.Size, Ephemeral: s.ControlPlane.Etcd.Ephemeral},
		},
	}
	if h := s.ControlPlane.Hosted; h != nil {
		hcp.Spec.Resources = *h.Resources.DeepCopy()
		hcp.Spec.ControllerManager.Resources = *h.ControllerManager.Resources.DeepCopy()
		hcp.Spec.Scheduler.Resources = *h.Scheduler.Resources.DeepCopy()
		hcp.Spec.KonnectivityServer.Resources = *h.KonnectivityServer.Resources.DeepCopy()
		hcp.Spec.Etcd.Resources = *h.Etcd.Resources.DeepCopy()
	}
	return hcp
}

// withKernelBoot gives a machine on the default node image the kernel-boot image
// that goes with it.
func (r renderer) withKernelBoot(m knestv1.MachineSpec, version string) knestv1.MachineSpec {
	if m.Image != "" || m.KernelBoot != nil || r.opts.NodeKernelRepository == NoKernelBoot {
		return m
	}
	m.KernelBoot = &knestv1.KernelBootSpec{Image: r.opts.NodeKernelRepository + ":" + version}
	defaultKernelBoot(m.KernelBoot)
	return m
}

func (r renderer) image(m knestv1.MachineSpec, version string) string {
	if m.Image != "" {
		return m.Image
	}
	return r.opts.NodeImageRepository + ":" + version
}

func (r renderer) controlPlane(templateName string) *controlplanev1.KubeadmControlPlane {
	s := r.nc.Spec
	sans := slices.Clone(s.APIServer.CertSANs) // nil when empty: an empty apiServer{} is invalid
	if s.APIServer.Host != "" && !slices.Contains(sans, s.APIServer.Host) {
		sans = append(sans, s.APIServer.Host)
	}
	nodeRegistration := bootstrapv1.NodeRegistrationOptions{CRISocket: criSocket}
	resumeFile, resumeCommands := resumeBootstrap("init")
	etcdArgs := etcdRaftArgs()
	files := append(probePatches(), resumeFile)
	var pre []string
	if d := r.etcdDisk(); d != nil {
		etcdArgs = append(etcdArgs, bootstrapv1.Arg{Name: "quota-backend-bytes", Value: ptr(strconv.FormatInt(hosted.EtcdQuotaBytes(d.Size), 10))})
		diskFile, diskCommand := etcdDiskMount()
		files, pre = append(files, diskFile), []string{diskCommand}
		// The disk's lost+found, or the data a restarted VM kept (etcdDiskMount).
		nodeRegistration.IgnorePreflightErrors = []string{"DirAvailable--var-lib-etcd"}
	}
	return &controlplanev1.KubeadmControlPlane{
		TypeMeta:   typeMeta(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane")),
		ObjectMeta: r.meta(ControlPlaneName(r.name), knestv1.ControlPlanePool),
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr(s.ControlPlane.Replicas),
			Version:  s.Version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{knestv1.ClusterNameLabel: r.name, knestv1.PoolNameLabel: knestv1.ControlPlanePool}},
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: capkv1.GroupVersion.Group,
						Kind:     "KubevirtMachineTemplate",
						Name:     templateName,
					},
					Deletion: controlplanev1.KubeadmControlPlaneMachineTemplateDeletionSpec{
						NodeDrainTimeoutSeconds: s.ControlPlane.NodeDrainTimeoutSeconds,
					},
				},
			},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{
					DNS:               bootstrapv1.DNS{ImageTag: CoreDNSImageTag(s.Version)},
					APIServer:         bootstrapv1.APIServer{CertSANs: sans},
					Etcd:              bootstrapv1.Etcd{Local: bootstrapv1.LocalEtcd{ExtraArgs: etcdArgs}},
					ControllerManager: bootstrapv1.ControllerManager{ExtraArgs: leaderElectionArgs()},
					Scheduler:         bootstrapv1.Scheduler{ExtraArgs: leaderElectionArgs()},
				},
				InitConfiguration: bootstrapv1.InitConfiguration{
					NodeRegistration: nodeRegistration, Timeouts: controlPlaneTimeouts(), Patches: bootstrapv1.Patches{Directory: patchDir},
				},
				JoinConfiguration: bootstrapv1.JoinConfiguration{
					NodeRegistration: nodeRegistration, Timeouts: controlPlaneTimeouts(), Patches: bootstrapv1.Patches{Directory: patchDir},
				},
				Files:               files,
				PreKubeadmCommands:  pre,
				PostKubeadmCommands: resumeCommands,
			},
		},
	}
}

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

// leaderElectionArgs lengthen kube-controller-manager's and kube-scheduler's leader
// election (defaults: lease 15 s, renew 10 s, retry 2 s). Tenant control planes share
// oversubscribed hosts; with the defaults a slow etcd write makes both components lose
// their lease and restart in a loop, and the cluster never gets past its first
// DaemonSets. Fail-over takes up to a minute instead of 15 s.
func leaderElectionArgs() []bootstrapv1.Arg {
	return []bootstrapv1.Arg{
		{Name: "leader-elect-lease-duration", Value: ptr("60s")},
		{Name: "leader-elect-renew-deadline", Value: ptr("45s")},
		{Name: "leader-elect-retry-period", Value: ptr("5s")},
	}
}

// etcdRaftArgs lengthen etcd's heartbeat (default 100 ms) and election timeout
// (default 1 s) to 500 ms and 10 s. A tenant's etcd members share oversubscribed
// hosts, where a member can be descheduled for seconds: measured in an upgrade under
// emulation (two control-plane VMs and a worker on 2 cores), the two-member etcd's
// term went from 9 to 66 in 31 minutes, it often had no leader, and the new API
// server could not start; with these the pair kept one leader. A member that really
// fails is noticed 9 s later than with the defaults.
func etcdRaftArgs() []bootstrapv1.Arg {
	return []bootstrapv1.Arg{
		{Name: "heartbeat-interval", Value: ptr("500")},
		{Name: "election-timeout", Value: ptr("10000")},
	}
}

// controlPlaneTimeouts give kubeadm 10 minutes (default 4) for the control-plane
// components' first health check, 5 minutes (default 1) for each of its API calls and
// 10 minutes (default 2) for a joining control plane's etcd calls: a VM that boots
// slowly must not fail `kubeadm init` or `join` and be replaced, which starts the same
// slow boot again. Measured under emulation: with two control planes booting at once,
// both `kubeadm init`s failed on 1-minute API calls after the API server was healthy;
// in an upgrade (three VMs on 2 cores), adding the new etcd member took 100 s of
// retries, and the 2 minutes ran out 2 s after its manifest was written, before the
// member could sync, which leaves the machine to KCP's remediation.
func controlPlaneTimeouts() bootstrapv1.Timeouts {
	return bootstrapv1.Timeouts{
		ControlPlaneComponentHealthCheckSeconds: ptr(int32(600)),
		KubernetesAPICallSeconds:                ptr(int32(300)),
		EtcdAPICallSeconds:                      ptr(int32(600)),
	}
}

// patchDir holds the kubeadm patches knest writes on control-plane nodes.
const patchDir = "/etc/kubernetes/knest-patches"

// probePatches relax kubeadm's probes of the control-plane static pods (liveness:
// 15 s timeout, 8 failures; startup: 4 minutes). On an oversubscribed host, or under
// emulation, a slow API server or etcd is not a dead one, and restarting it costs
// minutes more of the same load: measured under qemu TCG, the liveness probe killed
// a kube-apiserver that answered /livez in over 15 s, and its first start took 5 min.
// With these a component is restarted after 4 minutes of failed probes, and may take
// 10 minutes to start. The API server's readiness probe (only it has one) runs every
// 10 s instead of every second: each probe is a TLS handshake, which under emulation
// is CPU the API server then lacks.
func probePatches() []bootstrapv1.File {
	var files []bootstrapv1.File
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		content := "spec:\n  containers:\n  - name: " + c + "\n" +
			"    livenessProbe: {timeoutSeconds: 30, failureThreshold: 8, periodSeconds: 30}\n" +
			"    startupProbe: {timeoutSeconds: 30, failureThreshold: 20, periodSeconds: 30}\n"
		if c == "kube-apiserver" {
			content += "    readinessProbe: {timeoutSeconds: 30, periodSeconds: 10}\n"
		}
		files = append(files, bootstrapv1.File{
			Path:        patchDir + "/" + c + "+strategic.yaml",
			Owner:       "root:root",
			Permissions: "0644",
			Content:     content,
		})
	}
	return files
}

func (r renderer) pool(p knestv1.WorkerPool) (Pool, error) {
	name := PoolName(r.name, p.Name)
	version := PoolVersion(r.nc, p)
	mt, err := r.machineTemplate(p.Name, name, version, p.MachineSpec, p.GPUs, p.HostDevices, nil)
	if err != nil {
		return Pool{}, err
	}
	bt, err := r.bootstrapTemplate(name, p)
	if err != nil {
		return Pool{}, err
	}
	machineLabels := map[string]string{
		knestv1.ClusterNameLabel:             r.name,
		knestv1.PoolNameLabel:                p.Name,
		clusterv1.ClusterNameLabel:           r.name,
		clusterv1.MachineDeploymentNameLabel: name,
	}
	md := &clusterv1.MachineDeployment{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("MachineDeployment")),
		ObjectMeta: r.meta(name, p.Name),
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: r.name,
			Replicas:    PoolReplicas(p),
			Selector:    metav1.LabelSelector{MatchLabels: machineLabels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: machineLabels},
				Spec: clusterv1.MachineSpec{
					ClusterName: r.name,
					Version:     version,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group,
						Kind:     "KubeadmConfigTemplate",
						Name:     bt.Name,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: capkv1.GroupVersion.Group,
						Kind:     "KubevirtMachineTemplate",
						Name:     mt.Name,
					},
					Deletion: clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: p.NodeDrainTimeoutSeconds},
				},
			},
		},
	}
	if Autoscaled(p) {
		// knest leaves replicas out, so its server-side apply neither sets nor owns
		// them. Cluster API's defaulting webhook (v1.13
		// internal/webhooks/machinedeployment.go, calculateMachineDeploymentReplicas)
		// then fills them from these annotations: a new MachineDeployment starts at
		// the min size; an existing one whose replicas an apply drops (a pool that
		// becomes autoscaled, or knest re-applying after the webhook's value was
		// attributed to it) keeps its count clamped into [min, max]. Once the
		// autoscaler scales it, through the scale subresource, the field is the
		// autoscaler's, and knest's applies leave it alone.
		md.Annotations = autoscalingAnnotations(p)
	}
	if r.nc.Spec.Paused {
		md.Spec.Paused = ptr(true)
	}
	hc := r.healthCheck(name, p.Name, replicasOf(p), metav1.LabelSelector{MatchLabels: map[string]string{
		clusterv1.ClusterNameLabel:           r.name,
		clusterv1.MachineDeploymentNameLabel: name,
	}})
	return Pool{Name: p.Name, MachineTemplate: mt, BootstrapTemplate: bt, MachineDeployment: md, HealthCheck: hc}, nil
}

func (r renderer) bootstrapTemplate(base string, p knestv1.WorkerPool) (*bootstrapv1.KubeadmConfigTemplate, error) {
	nodeRegistration := bootstrapv1.NodeRegistrationOptions{CRISocket: criSocket}
	if len(p.Labels) > 0 {
		nodeRegistration.KubeletExtraArgs = []bootstrapv1.Arg{{Name: "node-labels", Value: ptr(joinLabels(p.Labels))}}
	}
	var taints []corev1.Taint
	for _, t := range p.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	if !r.nc.Spec.Providers.Storage.Disabled {
		// Pods with volumes wait for the node's CSI plugin (package startuptaint).
		taints = append(taints, startuptaint.Taint)
	}
	if len(taints) > 0 {
		nodeRegistration.Taints = ptr(taints)
	}
	resumeFile, resumeCommands := resumeBootstrap("join")
	spec := bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{
		Spec: bootstrapv1.KubeadmConfigSpec{
			JoinConfiguration:   bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration},
			Files:               []bootstrapv1.File{resumeFile},
			PostKubeadmCommands: resumeCommands,
		},
	}}
	name, err := hashedName(base, spec)
	if err != nil {
		return nil, err
	}
	return &bootstrapv1.KubeadmConfigTemplate{
		TypeMeta:   typeMeta(bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate")),
		ObjectMeta: r.meta(name, p.Name),
		Spec:       spec,
	}, nil
}

// healthCheck replaces a node that never joins (Options.NodeStartupTimeout), goes
// silent (Ready Unknown: its VM or kubelet died) or stays NotReady; the timeouts are
// generous because nested VMs boot slowly. A node is NotReady from its join until
// its CNI runs, which on an oversubscribed host took more than 5 minutes
// (docs/e2e.md), and replacing it starts the same wait again, so NotReady gets 15; a
// silent node gets 5.
// Remediation stops when more than 40% of the group is unhealthy (that is a host
// problem, not a node problem) — but always allows one: CAPI rounds 40% of a group
// of one or two down to zero, so small groups (most tenant pools) would never be
// remediated.
func (r renderer) healthCheck(name, pool string, replicas int32, selector metav1.LabelSelector) *clusterv1.MachineHealthCheck {
	maxUnhealthy := max(1, replicas*2/5)
	notReady, silent := int32(900), int32(300)
	return &clusterv1.MachineHealthCheck{
		TypeMeta:   typeMeta(clusterv1.GroupVersion.WithKind("MachineHealthCheck")),
		ObjectMeta: r.meta(name, pool),
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: r.name,
			Selector:    selector,
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr(int32(r.opts.NodeStartupTimeout / time.Second)),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: &notReady},
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: &silent},
				},
			},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyLessThanOrEqualTo: ptr(intstr.FromInt32(maxUnhealthy)),
			}},
		},
	}
}

// clusterResourceSet applies a ConfigMap's objects to this cluster's tenant.
func (r renderer) clusterResourceSet(name, configMap string, strategy addonsv1.ClusterResourceSetStrategy) *addonsv1.ClusterResourceSet {
	return &addonsv1.ClusterResourceSet{
		TypeMeta:   typeMeta(addonsv1.GroupVersion.WithKind("ClusterResourceSet")),
		ObjectMeta: r.meta(name, ""),
		Spec: addonsv1.ClusterResourceSetSpec{
			// Select this cluster only: tenants' settings (pod CIDR, classes) differ.
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{knestv1.ClusterNameLabel: r.name}},
			Resources:       []addonsv1.ResourceRef{{Kind: "ConfigMap", Name: configMap}},
			Strategy:        string(strategy),
		},
	}
}

func typeMeta(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

func joinLabels(labels map[string]knestv1.LabelValue) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+string(labels[k]))
	}
	return strings.Join(parts, ",")
}

// replicasOf is the pool's size for its health check: the most nodes it can have.
func replicasOf(p knestv1.WorkerPool) int32 {
	if Autoscaled(p) {
		return p.Autoscaling.MaxReplicas
	}
	return *PoolReplicas(p)
}
