package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// vmControlPlane renders a control plane of VMs: their machine template, the
// KubeadmControlPlane and its health check.
func (r renderer) vmControlPlane(g *Graph) error {
	s := r.nc.Spec
	var err error
	if g.ControlPlaneTemplate, err = r.machineTemplate(knestv1.ControlPlanePool, ControlPlaneName(r.name), s.Version, s.ControlPlane.MachineSpec, nil, nil, r.etcdDisk()); err != nil {
		return fmt.Errorf("failed to render control-plane machine template: %w", err)
	}
	g.ControlPlane = r.controlPlane(g.ControlPlaneTemplate.Name)
	g.ControlPlaneHealthCheck = r.healthCheck(ControlPlaneName(r.name), knestv1.ControlPlanePool, s.ControlPlane.Replicas,
		metav1.LabelSelector{MatchLabels: map[string]string{
			clusterv1.ClusterNameLabel:         r.name,
			clusterv1.MachineControlPlaneLabel: "",
		}})
	return nil
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

func (r renderer) controlPlane(templateName string) *controlplanev1.KubeadmControlPlane {
	s := r.nc.Spec
	sans := slices.Clone(s.APIServer.CertSANs) // nil when empty: an empty apiServer{} is invalid
	if s.APIServer.Host != "" && !slices.Contains(sans, s.APIServer.Host) {
		sans = append(sans, s.APIServer.Host)
	}
	nodeRegistration := bootstrapv1.NodeRegistrationOptions{CRISocket: criSocket, KubeletExtraArgs: slowHostKubeletArgs(r.opts.HostSlowdown)}
	resumeFile, resumeCommands := resumeBootstrap("init")
	etcdArgs := etcdRaftArgs()
	files := append(probePatches(r.opts.HostSlowdown), resumeFile)
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
					NodeRegistration: nodeRegistration, Timeouts: controlPlaneTimeouts(r.opts.HostSlowdown), Patches: bootstrapv1.Patches{Directory: patchDir},
				},
				JoinConfiguration: bootstrapv1.JoinConfiguration{
					NodeRegistration: nodeRegistration, Timeouts: controlPlaneTimeouts(r.opts.HostSlowdown), Patches: bootstrapv1.Patches{Directory: patchDir},
				},
				Files:               files,
				PreKubeadmCommands:  pre,
				PostKubeadmCommands: resumeCommands,
			},
		},
	}
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
func controlPlaneTimeouts(slowdown int) bootstrapv1.Timeouts {
	return slowHostTimeouts(bootstrapv1.Timeouts{
		ControlPlaneComponentHealthCheckSeconds: ptr(int32(600)),
		KubernetesAPICallSeconds:                ptr(int32(300)),
		EtcdAPICallSeconds:                      ptr(int32(600)),
	}, slowdown)
}

// kubeadm's own timeouts (v1beta4 defaults), which knest leaves to kubeadm on a host
// at hardware speed.
var kubeadmTimeouts = bootstrapv1.Timeouts{
	ControlPlaneComponentHealthCheckSeconds: ptr(int32(240)),
	KubeletHealthCheckSeconds:               ptr(int32(240)),
	KubernetesAPICallSeconds:                ptr(int32(60)),
	EtcdAPICallSeconds:                      ptr(int32(120)),
	TLSBootstrapSeconds:                     ptr(int32(300)),
	DiscoverySeconds:                        ptr(int32(300)),
}

// slowHostTimeouts multiplies every timeout of t, those it leaves to kubeadm
// included, by slowdown (Options.HostSlowdown), so that a boot that is slow only
// because the host is slow does not fail kubeadm init or join. At 1 it returns t
// as it is: a tenant's kubeadm configuration changes (and Cluster API rolls its
// machines) only when the host's slowdown does.
func slowHostTimeouts(t bootstrapv1.Timeouts, slowdown int) bootstrapv1.Timeouts {
	if slowdown <= 1 {
		return t
	}
	scale := func(set, def *int32) *int32 {
		if set == nil {
			set = def
		}
		return ptr(*set * int32(slowdown))
	}
	return bootstrapv1.Timeouts{
		ControlPlaneComponentHealthCheckSeconds: scale(t.ControlPlaneComponentHealthCheckSeconds, kubeadmTimeouts.ControlPlaneComponentHealthCheckSeconds),
		KubeletHealthCheckSeconds:               scale(t.KubeletHealthCheckSeconds, kubeadmTimeouts.KubeletHealthCheckSeconds),
		KubernetesAPICallSeconds:                scale(t.KubernetesAPICallSeconds, kubeadmTimeouts.KubernetesAPICallSeconds),
		EtcdAPICallSeconds:                      scale(t.EtcdAPICallSeconds, kubeadmTimeouts.EtcdAPICallSeconds),
		TLSBootstrapSeconds:                     scale(t.TLSBootstrapSeconds, kubeadmTimeouts.TLSBootstrapSeconds),
		DiscoverySeconds:                        scale(t.DiscoverySeconds, kubeadmTimeouts.DiscoverySeconds),
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
// 10 minutes times the host's slowdown to start, as long as kubeadm waits for it
// (controlPlaneTimeouts): a startup window shorter than kubeadm's wait restarts an
// API server that is slow, not stuck, every 10 minutes, and it never comes up. The
// API server's readiness probe (only it has one) runs every 10 s instead of every
// second: each probe is a TLS handshake, which under emulation is CPU the API server
// then lacks.
func probePatches(slowdown int) []bootstrapv1.File {
	startupFailures := strconv.Itoa(20 * max(slowdown, 1))
	var files []bootstrapv1.File
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		content := "spec:\n  containers:\n  - name: " + c + "\n" +
			"    livenessProbe: {timeoutSeconds: 30, failureThreshold: 8, periodSeconds: 30}\n" +
			"    startupProbe: {timeoutSeconds: 30, failureThreshold: " + startupFailures + ", periodSeconds: 30}\n"
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

// The kubelet's defaults for each call to the container runtime
// (--runtime-request-timeout) and for how often its cAdvisor reads every container's
// cgroup (--housekeeping-interval).
const (
	kubeletRuntimeRequestTimeout = 2 * time.Minute
	kubeletHousekeepingInterval  = 10 * time.Second
)

// slowHostKubeletArgs stretch, by the host's slowdown, the kubelet's deadline for each
// container runtime call: under emulation, creating and starting a large container
// (the conformance suite's, 100 MB) took 71 and 49 s on a busy host, and past 2
// minutes the kubelet gives up with "context deadline exceeded" and a pod that never
// restarts fails. And the interval of its cAdvisor's housekeeping, which was a quarter
// of the kubelet's CPU on an emulated worker whose one vCPU was saturated (a CPU
// profile through the node proxy). None at hardware speed, so nothing is rolled there.
func slowHostKubeletArgs(slowdown int) []bootstrapv1.Arg {
	if slowdown <= 1 {
		return nil
	}
	stretch := func(d time.Duration) *string { return ptr((d * time.Duration(slowdown)).String()) }
	return []bootstrapv1.Arg{
		{Name: "runtime-request-timeout", Value: stretch(kubeletRuntimeRequestTimeout)},
		{Name: "housekeeping-interval", Value: stretch(kubeletHousekeepingInterval)},
	}
}
