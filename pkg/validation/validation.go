// Package validation checks a NestedCluster against the rules its CRD enforces, so the
// knest CLI can refuse bad input before it touches a cluster and say what to change.
// The API server stays the authority; the integration tests run the same cases
// against it to keep the two in step.
package validation

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/kubever"
)

// Limits from the NestedCluster CRD.
const (
	MaxClusterNameLength = 30
	MaxPoolNameLength    = 15
	MaxPools             = 12
	MaxPoolReplicas      = 200
	MaxCPU               = 128
	MaxCertSANs          = 32
)

// ControlPlaneReplicas are the control-plane sizes the CRD allows.
var ControlPlaneReplicas = []int32{1, 3, 5, 7}

var (
	dnsLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	// dnsName is a DNS name as CoreDNS and resolvers take it: labels of at most 63
	// characters (the API server's DNS-1123 subdomain does not limit labels).
	dnsName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)
	versionRE  = regexp.MustCompile(`^v1\.(3[0-6])\.(0|[1-9][0-9]{0,3})$`)
	minCPMem   = resource.MustParse("1700Mi")
	minPoolMem = resource.MustParse("1Gi")
	maxMem     = resource.MustParse("1Ti")
	maxDisk    = resource.MustParse("64Ti")
	// As the CRD's rules: Kubernetes' qualified names and label values.
	qualifiedName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValue    = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`)
	kubeNamespace = regexp.MustCompile(`^([^/]*\.)?(kubernetes|k8s)\.io/`)
	kubeletAllows = regexp.MustCompile(`^(node|kubelet|topology)\.kubernetes\.io/`)
	certSAN       = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)
	// kernelPath is KubeVirt's ValidatePath for kernel-boot paths: absolute, no "."
	// or ".." components, no "//".
	kernelPath = regexp.MustCompile(`^(/([^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))+/?$`)
)

// Messages shared with the CRD's rules (the tests hold both to the same cases).
const (
	memoryMaxMessage    = "memory must be at most 1Ti, e.g. 8Gi: no host node offers more to one VM"
	rootDiskSizeMessage = "rootDisk.size must be more than 0 and at most 64Ti, e.g. 20Gi"
	reservedPoolMessage = "pool name cp is reserved: the control plane's objects are named <cluster>-cp; pick another, e.g. gpu"
	labelKeyMessage     = "label keys must be qualified names: an optional DNS-name prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. example.com/gpu"
	labelNamespaceMsg   = "label keys in the kubernetes.io and k8s.io namespaces (node-role.kubernetes.io/ too) are refused by kubelet, except under node.kubernetes.io/, kubelet.kubernetes.io/ and topology.kubernetes.io/; use a prefix of your own, e.g. example.com/role"
	labelValueMessage   = "label values must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (no ',' or '='), e.g. a10"
	labelsLengthMessage = "labels must fit kubelet's --node-labels: at most 1024 characters as key=value pairs joined by ','"
	taintEffectMessage  = "taint effect must be NoSchedule, PreferNoSchedule or NoExecute"
	taintKeyMessage     = "taint keys must be qualified names: an optional DNS-name prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. example.com/gpu"
	taintValueMessage   = "taint values must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. true"
	apiHostMessage      = "apiServer.host must be a DNS name or an IP address, e.g. api.tenant.example.com or 192.0.2.10"
	certSANsMessage     = "apiServer.certSANs must be DNS names (a leading *. is allowed) or IP addresses, e.g. api.tenant.example.com or 192.0.2.10"
	dnsDomainMessage    = "network.dnsDomain must be a DNS name: labels of at most 63 lower-case letters, digits and '-', joined by '.', e.g. tenant.local"
	imageMessage        = "image must be a container image reference as the kubelet parses it, [registry[:port]/]path[:tag][@sha256:digest] with a lower-case path, e.g. quay.io/example/node:v1.35.4"
	storageClassMessage = "rootDisk.storageClassName must be a storage class name: a DNS subdomain of at most 253 lower-case letters, digits, '-' and '.', e.g. fast-ssd"
	deviceNameMessage   = "deviceName must be an extended resource name as the kubelet takes it: a DNS-name prefix of at most 244 characters (not kubernetes.io), '/', then at most 63 letters, digits, '-', '_' or '.', e.g. nvidia.com/GA102GL_A10"
	kernelPathMessage   = "kernelBoot paths must be absolute paths to a file in the image without '.', '..' or '//' (KubeVirt refuses others), e.g. /boot/vmlinuz"
	// AutoscaledReplicasMessage refuses replicas on an autoscaled pool.
	AutoscaledReplicasMessage = "an autoscaled pool takes no replicas: the autoscaler sizes it between autoscaling.minReplicas and maxReplicas; leave replicas out"
	autoscalingOrderMessage   = "autoscaling.minReplicas must be at most autoscaling.maxReplicas, e.g. 0 and 3"
)

// Messages for quantities that do not parse, shared with the CRD's rules and the
// CLI's flags.
const (
	MemoryQuantityMessage   = "memory must be a quantity such as 4Gi or 4096Mi (suffixes Ki, Mi, Gi, Ti; 4GB is not a quantity)"
	DiskSizeQuantityMessage = "rootDisk.size must be a quantity such as 20Gi (suffixes Ki, Mi, Gi, Ti; 20GB is not a quantity)"
)

// NestedCluster validates nc as the API server would after defaulting it: it checks a
// defaulted copy and leaves nc unchanged.
func NestedCluster(nc *knestv1.NestedCluster) field.ErrorList {
	nc = nc.DeepCopy()
	cluster.Default(nc)

	var errs field.ErrorList
	errs = append(errs, ClusterName(nc.Name, field.NewPath("metadata", "name"))...)
	if nc.Namespace != "" && !NamespaceValid(nc.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), nc.Namespace, NamespaceMessage))
	}
	errs = append(errs, spec(&nc.Spec, field.NewPath("spec"))...)
	return errs
}

// ClusterName checks a NestedCluster name: a DNS label of at most 30 characters,
// because it prefixes the names of the VMs and Services knest creates.
func ClusterName(name string, path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "a cluster needs a name")}
	case len(name) > MaxClusterNameLength:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("must have at most %d characters (it has %d): it prefixes the names of the VMs and Services knest creates", MaxClusterNameLength, len(name)))}
	case !dnsLabel.MatchString(name):
		return field.ErrorList{field.Invalid(path, name, "must be a DNS label: lower-case letters, digits and '-', starting with a letter and not ending with '-'")}
	}
	return nil
}

// PoolName checks a worker pool name: a DNS label of at most 15 characters.
func PoolName(name string, path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "a pool needs a name")}
	case len(name) > MaxPoolNameLength:
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("a pool name must have at most %d characters (it has %d): it is part of every node's name", MaxPoolNameLength, len(name)))}
	case !dnsLabel.MatchString(name):
		return field.ErrorList{field.Invalid(path, name, "pool name must be a DNS label: lower-case letters, digits and '-', starting with a letter and not ending with '-'")}
	case name == "cp":
		return field.ErrorList{field.Invalid(path, name, reservedPoolMessage)}
	}
	return nil
}

// NamespaceMessage explains what a namespace name must be.
const NamespaceMessage = "a namespace name is a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit, e.g. team-a"

// NamespaceValid reports whether ns can name a namespace.
func NamespaceValid(ns string) bool { return len(apivalidation.IsDNS1123Label(ns)) == 0 }

// ControlPlaneReplicasValid reports whether n is an allowed control-plane size.
func ControlPlaneReplicasValid(n int32) bool {
	for _, v := range ControlPlaneReplicas {
		if n == v {
			return true
		}
	}
	return false
}

// ControlPlaneReplicasMessage explains the control-plane size rule.
const ControlPlaneReplicasMessage = "must be 1, 3, 5 or 7: an even number of etcd members tolerates no more failures than one fewer and risks split votes"

func spec(s *knestv1.NestedClusterSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, Version(s.Version, path.Child("version"))...)

	cp := path.Child("controlPlane")
	if !ControlPlaneReplicasValid(s.ControlPlane.Replicas) {
		errs = append(errs, field.Invalid(cp.Child("replicas"), s.ControlPlane.Replicas, ControlPlaneReplicasMessage))
	}
	errs = append(errs, machine(&s.ControlPlane.MachineSpec, cp)...)
	if s.ControlPlane.CPU < 2 {
		errs = append(errs, field.Invalid(cp.Child("cpu"), s.ControlPlane.CPU, "must be at least 2: kubeadm refuses to init a control plane with fewer CPUs"))
	}
	if m := s.ControlPlane.Memory; m != nil && m.Cmp(minCPMem) < 0 {
		errs = append(errs, field.Invalid(cp.Child("memory"), m.String(), "must be at least 1700Mi: kubeadm refuses to init a control plane with less"))
	}

	errs = append(errs, hostedControlPlane(&s.ControlPlane, cp)...)
	errs = append(errs, etcd(&s.ControlPlane.Etcd, cp.Child("etcd"))...)

	errs = append(errs, workers(s.Workers, path.Child("workers"))...)
	errs = append(errs, poolSkew(s, path.Child("workers"))...)
	errs = append(errs, network(&s.Network, path.Child("network"))...)
	errs = append(errs, apiServer(&s.APIServer, path.Child("apiServer"))...)
	errs = append(errs, storage(&s.Providers.Storage, path.Child("providers", "storage"))...)
	return errs
}

// Messages of the storage provider, shared with the CRD's rules.
const (
	storageDefaultsMessage = "at most one tenant StorageClass can be the default"
	storageDisabledMessage = "storage.classes need the storage provider: leave out storage.disabled or the classes"
	tenantClassMessage     = "a StorageClass name is lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. fast-ssd"
)

// storage checks the tenant's StorageClasses as the CRD does.
func storage(st *knestv1.StorageProviderSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if st.Disabled && len(st.Classes) > 0 {
		errs = append(errs, field.Invalid(path, "{...}", storageDisabledMessage))
	}
	defaults := 0
	for i, c := range st.Classes {
		if len(c.Name) == 0 || len(c.Name) > 63 || len(apivalidation.IsDNS1123Subdomain(c.Name)) > 0 {
			errs = append(errs, field.Invalid(path.Child("classes").Index(i).Child("name"), c.Name, tenantClassMessage))
		}
		if c.Default {
			defaults++
		}
	}
	if defaults > 1 {
		errs = append(errs, field.Invalid(path, "{...}", storageDefaultsMessage))
	}
	return errs
}

// Messages of the control-plane mode, shared with the CRD's rules.
const (
	hostedReplicasMessage = "a hosted control plane has 1 or 3 API server replicas (controlPlane.replicas)"
	hostedNeedsModeMsg    = "controlPlane.hosted needs controlPlane.mode Hosted"
	etcdEphemeralMessage  = "controlPlane.etcd.ephemeral keeps etcd off any volume: it cannot have a storageClassName or size too"
	etcdSizeMessage       = "controlPlane.etcd.size must be from 1Gi to 64Gi, e.g. 4Gi"
	etcdMembersMessage    = "controlPlane.etcd.members must be 1 or 3: three members keep quorum when one is lost"
	etcdMembersModeMsg    = "controlPlane.etcd.members needs controlPlane.mode Hosted: a VM control plane runs one etcd member per node (controlPlane.replicas)"
	etcdEphemeralMembers  = "controlPlane.etcd.ephemeral has one member: a member that restarts on an empty directory cannot rejoin the others"
	etcdClassMessage      = "controlPlane.etcd.storageClassName must be a storage class name: a DNS subdomain of at most 253 lower-case letters, digits, '-' and '.', e.g. fast-ssd"
	hostedLimitMessage    = "controlPlane.hosted.%sresources.limits.%s must be at least its request: the host refuses a pod whose limit is below its request"
	hostedMachineMessage  = "controlPlane.cpu, memory, image, rootDisk and kernelBoot shape control-plane VMs, and a hosted control plane has none: leave them out, and size its API servers with controlPlane.hosted.resources"
)

var defaultMemory = resource.MustParse(knestv1.DefaultMemory)

// vmShaped: the machine fields of a control plane hold more than the CRD's defaults.
func vmShaped(m *knestv1.MachineSpec) bool {
	rd := m.RootDisk
	return m.Image != "" || m.KernelBoot != nil || (m.CPU != 0 && m.CPU != knestv1.DefaultCPU) ||
		(m.Memory != nil && m.Memory.Cmp(defaultMemory) != 0) ||
		(rd.Type != "" && rd.Type != knestv1.RootDiskContainerDisk) || rd.Size != nil || rd.StorageClassName != ""
}

func hostedControlPlane(cp *knestv1.ControlPlaneSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch cp.Mode {
	case "", knestv1.ControlPlaneVM:
		if cp.Hosted != nil {
			errs = append(errs, field.Invalid(path.Child("hosted"), "{...}", hostedNeedsModeMsg))
		}
		if cp.Etcd.Members != 0 {
			errs = append(errs, field.Invalid(path.Child("etcd", "members"), cp.Etcd.Members, etcdMembersModeMsg))
		}
	case knestv1.ControlPlaneHosted:
		if cp.Replicas != 1 && cp.Replicas != 3 {
			errs = append(errs, field.Invalid(path.Child("replicas"), cp.Replicas, hostedReplicasMessage))
		}
		if vmShaped(&cp.MachineSpec) {
			errs = append(errs, field.Invalid(path, "{...}", hostedMachineMessage))
		}
		if h := cp.Hosted; h != nil {
			hp := path.Child("hosted")
			errs = append(errs, limitsAboveRequests(h.Resources, hp, "")...)
			for _, c := range []struct {
				name string
				spec knestv1.HostedComponentSpec
			}{
				{"controllerManager", h.ControllerManager}, {"scheduler", h.Scheduler},
				{"konnectivityServer", h.KonnectivityServer}, {"etcd", h.Etcd},
			} {
				errs = append(errs, limitsAboveRequests(c.spec.Resources, hp.Child(c.name), c.name+".")...)
			}
		}

	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), cp.Mode, []knestv1.ControlPlaneMode{knestv1.ControlPlaneVM, knestv1.ControlPlaneHosted}))
	}
	return errs
}

// limitsAboveRequests refuses a CPU or memory limit below its request, as the CRD's
// rule on each hosted resources field does; component names the field.
func limitsAboveRequests(res corev1.ResourceRequirements, path *field.Path, component string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, hasLimit := res.Limits[name]
		request, hasRequest := res.Requests[name]
		if hasLimit && hasRequest && limit.Cmp(request) < 0 {
			errs = append(errs, field.Invalid(path, "{...}", fmt.Sprintf(hostedLimitMessage, component, name)))
		}
	}
	return errs
}

var minEtcdSize, maxEtcdSize = resource.MustParse("1Gi"), resource.MustParse("64Gi")

func etcd(e *knestv1.EtcdSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(e.StorageClassName) > 253 {
		errs = append(errs, field.TooLong(path.Child("storageClassName"), e.StorageClassName, 253))
	} else if e.StorageClassName != "" && len(apivalidation.IsDNS1123Subdomain(e.StorageClassName)) > 0 {
		errs = append(errs, field.Invalid(path.Child("storageClassName"), e.StorageClassName, etcdClassMessage))
	}
	if e.Size != nil && (e.Size.Cmp(minEtcdSize) < 0 || e.Size.Cmp(maxEtcdSize) > 0) {
		errs = append(errs, field.Invalid(path.Child("size"), e.Size.String(), etcdSizeMessage))
	}
	if e.Ephemeral && (e.StorageClassName != "" || e.Size != nil) {
		errs = append(errs, field.Invalid(path, "{...}", etcdEphemeralMessage))
	}
	if e.Members != 0 && e.Members != 1 && e.Members != 3 {
		errs = append(errs, field.Invalid(path.Child("members"), e.Members, etcdMembersMessage))
	}
	if e.Ephemeral && e.Members > 1 {
		errs = append(errs, field.Invalid(path, "{...}", etcdEphemeralMembers))
	}
	return errs
}

func machine(m *knestv1.MachineSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.CPU < 1 || m.CPU > MaxCPU {
		errs = append(errs, field.Invalid(path.Child("cpu"), m.CPU, fmt.Sprintf("must be from 1 to %d virtual CPUs", MaxCPU)))
	}
	if m.Memory != nil && m.Memory.Sign() <= 0 {
		errs = append(errs, field.Invalid(path.Child("memory"), m.Memory.String(), "must be a positive quantity such as 4Gi"))
	} else if m.Memory != nil && m.Memory.Cmp(maxMem) > 0 {
		errs = append(errs, field.Invalid(path.Child("memory"), m.Memory.String(), memoryMaxMessage))
	}
	errs = append(errs, image(m.Image, path.Child("image"))...)
	rd := path.Child("rootDisk")
	switch m.RootDisk.Type {
	case knestv1.RootDiskContainerDisk, knestv1.RootDiskDataVolume:
	default:
		errs = append(errs, field.NotSupported(rd.Child("type"), m.RootDisk.Type, []knestv1.RootDiskType{knestv1.RootDiskContainerDisk, knestv1.RootDiskDataVolume}))
	}
	if m.RootDisk.Type == knestv1.RootDiskDataVolume && m.RootDisk.Size == nil {
		errs = append(errs, field.Required(rd.Child("size"), "rootDisk.size is required when rootDisk.type is DataVolume"))
	}
	if sz := m.RootDisk.Size; sz != nil && (sz.Sign() <= 0 || sz.Cmp(maxDisk) > 0) {
		errs = append(errs, field.Invalid(rd.Child("size"), sz.String(), rootDiskSizeMessage))
	}
	if sc := m.RootDisk.StorageClassName; len(sc) > 253 {
		errs = append(errs, field.TooLong(rd.Child("storageClassName"), sc, 253))
	} else if sc != "" && len(apivalidation.IsDNS1123Subdomain(sc)) > 0 {
		errs = append(errs, field.Invalid(rd.Child("storageClassName"), sc, storageClassMessage))
	}
	if kb := m.KernelBoot; kb != nil {
		kp := path.Child("kernelBoot")
		if kb.Image == "" {
			errs = append(errs, field.Required(kp.Child("image"), "a kernel-boot image is required"))
		} else {
			errs = append(errs, image(kb.Image, kp.Child("image"))...)
		}
		errs = append(errs, kernelBootPath(kb.KernelPath, kp.Child("kernelPath"))...)
		errs = append(errs, kernelBootPath(kb.InitrdPath, kp.Child("initrdPath"))...)
		if len(kb.KernelArgs) > 1024 {
			errs = append(errs, field.TooLong(kp.Child("kernelArgs"), kb.KernelArgs, 1024))
		}
	}
	if d := m.NodeDrainTimeoutSeconds; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(path.Child("nodeDrainTimeoutSeconds"), *d, "must be 0 (wait forever) or more"))
	}
	return errs
}

// image checks a node or kernel-boot image reference as the kubelet parses it
// (github.com/distribution/reference, as kubelet and containerd do); empty means the
// default image.
func image(ref string, path *field.Path) field.ErrorList {
	switch {
	case ref == "":
		return nil
	case len(ref) > 512:
		return field.ErrorList{field.TooLong(path, ref, 512)}
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return field.ErrorList{field.Invalid(path, ref, imageMessage)}
	}
	return nil
}

// kernelBootPath checks a path inside a kernel-boot image as KubeVirt does.
func kernelBootPath(p string, path *field.Path) field.ErrorList {
	switch {
	case len(p) > 512:
		return field.ErrorList{field.TooLong(path, p, 512)}
	case p != "" && !kernelPath.MatchString(p):
		return field.ErrorList{field.Invalid(path, p, kernelPathMessage)}
	}
	return nil
}

func workers(pools []knestv1.WorkerPool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(pools) > MaxPools {
		errs = append(errs, field.TooMany(path, len(pools), MaxPools))
	}
	seen := map[string]bool{}
	for i := range pools {
		p := &pools[i]
		pp := path.Index(i)
		errs = append(errs, PoolName(p.Name, pp.Child("name"))...)
		if seen[p.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		seen[p.Name] = true
		if r := p.Replicas; r != nil && (*r < 0 || *r > MaxPoolReplicas) {
			errs = append(errs, field.Invalid(pp.Child("replicas"), *r, fmt.Sprintf("must be from 0 to %d", MaxPoolReplicas)))
		}
		errs = append(errs, autoscaling(p, pp)...)
		if p.Version != "" {
			errs = append(errs, Version(p.Version, pp.Child("version"))...)
		}
		errs = append(errs, machine(&p.MachineSpec, pp)...)
		if m := p.Memory; m != nil && m.Sign() > 0 && m.Cmp(minPoolMem) < 0 {
			errs = append(errs, field.Invalid(pp.Child("memory"), m.String(), "a worker pool's memory must be at least 1Gi for kubelet, a runtime and the CNI to fit"))
		}
		errs = append(errs, nodeLabels(p.Labels, pp.Child("labels"))...)
		errs = append(errs, taints(p.Taints, pp.Child("taints"))...)
		errs = append(errs, devices(p.GPUs, pp.Child("gpus"))...)
		errs = append(errs, devices(p.HostDevices, pp.Child("hostDevices"))...)
	}
	return errs
}

// autoscaling checks an autoscaled pool's bounds as the CRD does, and that it has no
// replicas of its own.
func autoscaling(p *knestv1.WorkerPool, path *field.Path) field.ErrorList {
	a := p.Autoscaling
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if p.Replicas != nil {
		errs = append(errs, field.Invalid(path.Child("replicas"), *p.Replicas, AutoscaledReplicasMessage))
	}
	ap := path.Child("autoscaling")
	if a.MinReplicas < 0 || a.MinReplicas > MaxPoolReplicas {
		errs = append(errs, field.Invalid(ap.Child("minReplicas"), a.MinReplicas, fmt.Sprintf("must be from 0 to %d", MaxPoolReplicas)))
	}
	if a.MaxReplicas < 1 || a.MaxReplicas > MaxPoolReplicas {
		errs = append(errs, field.Invalid(ap.Child("maxReplicas"), a.MaxReplicas, fmt.Sprintf("must be from 1 to %d: an autoscaled pool can have at least one node", MaxPoolReplicas)))
	}
	if a.MinReplicas > a.MaxReplicas {
		errs = append(errs, field.Invalid(ap, fmt.Sprintf("%d-%d", a.MinReplicas, a.MaxReplicas), autoscalingOrderMessage))
	}
	return errs
}

// Version checks a tenant Kubernetes version as the CRD does: v1.MINOR.PATCH within
// the minors the pinned Cluster API release supports.
func Version(v string, path *field.Path) field.ErrorList {
	switch {
	case len(v) > 20:
		return field.ErrorList{field.TooLong(path, v, 20)}
	case !versionRE.MatchString(v):
		return field.ErrorList{field.Invalid(path, v, kubever.RangeMessage)}
	}
	return nil
}

// poolSkew checks, as the CRD does, that no pool is held newer than spec.version or
// further behind it than kubelet's skew policy allows, and that no pool held at
// another minor is autoscaled.
func poolSkew(s *knestv1.NestedClusterSpec, path *field.Path) field.ErrorList {
	cp, err := kubever.Parse(s.Version)
	if err != nil {
		return nil
	}
	var errs field.ErrorList
	for i, p := range s.Workers {
		pv, err := kubever.Parse(p.Version)
		if p.Version == "" || err != nil {
			continue
		}
		if err := kubever.CheckPoolSkew(pv, cp); err != nil {
			errs = append(errs, field.Invalid(path.Index(i).Child("version"), p.Version, err.Error()))
		}
		if p.Autoscaling != nil && kubever.NewMachinesBlocked(p.Version, s.Version) {
			errs = append(errs, field.Invalid(path.Index(i).Child("autoscaling"), "{...}", kubever.HeldPoolAutoscaledMessage))
		}
	}
	return errs
}

// Update checks a change of old to nc as the CRD's transition rules do: versions move
// forward, by one minor at most, and a pool never goes back.
func Update(old, nc *knestv1.NestedCluster) field.ErrorList {
	errs := NestedCluster(nc)
	path := field.NewPath("spec", "version")
	from, errOld := kubever.Parse(old.Spec.Version)
	to, errNew := kubever.Parse(nc.Spec.Version)
	if errOld != nil || errNew != nil {
		return errs
	}
	if err := kubever.CheckUpgrade(from, to); err != nil {
		errs = append(errs, field.Invalid(path, nc.Spec.Version, err.Error()))
	}
	for i, p := range nc.Spec.Workers {
		pv, err := kubever.Parse(p.Version)
		if p.Version == "" || err != nil {
			continue
		}
		for _, o := range old.Spec.Workers {
			if o.Name != p.Name {
				continue
			}
			was, err := kubever.Parse(cluster.PoolVersion(old, o))
			if err == nil && pv.Compare(was) < 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "workers").Index(i).Child("version"), p.Version, kubever.PoolBackMessage))
			}
		}
	}
	return append(errs, heldPoolsGrow(old, nc)...)
}

// heldPoolsGrow refuses, as the CRD's transition rule does, more replicas for a pool
// held at another minor than spec.version (a pool the update adds had none):
// Cluster API would create none of its machines.
func heldPoolsGrow(old, nc *knestv1.NestedCluster) field.ErrorList {
	var errs field.ErrorList
	for i, p := range nc.Spec.Workers {
		if p.Version == "" || !kubever.NewMachinesBlocked(p.Version, nc.Spec.Version) {
			continue
		}
		var had int32
		for _, o := range old.Spec.Workers {
			if o.Name == p.Name {
				had = o.ReplicasOrDefault()
			}
		}
		if n := p.ReplicasOrDefault(); n > 0 && n > had {
			errs = append(errs, field.Invalid(field.NewPath("spec", "workers").Index(i).Child("replicas"), n, kubever.HeldPoolGrowMessage))
		}
	}
	return errs
}

// nodeLabels checks labels as the CRD does: what kubelet's --node-labels accepts.
func nodeLabels(labels map[string]knestv1.LabelValue, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(labels) > 64 {
		errs = append(errs, field.TooMany(path, len(labels), 64))
	}
	joined := -1
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := string(labels[k])
		joined += len(k) + len(v) + 2
		switch {
		case len(k) > 317 || !qualifiedName.MatchString(k):
			errs = append(errs, field.Invalid(path.Key(k), k, labelKeyMessage))
		case kubeNamespace.MatchString(k) && !kubeletAllows.MatchString(k):
			errs = append(errs, field.Invalid(path.Key(k), k, labelNamespaceMsg))
		}
		if !labelValue.MatchString(v) {
			errs = append(errs, field.Invalid(path.Key(k), v, labelValueMessage))
		}
	}
	if joined > 1024 {
		errs = append(errs, field.Invalid(path, joined, labelsLengthMessage))
	}
	return errs
}

func taints(ts []knestv1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ts) > 32 {
		errs = append(errs, field.TooMany(path, len(ts), 32))
	}
	for i, t := range ts {
		tp := path.Index(i)
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, taintEffectMessage))
		}
		if len(t.Key) > 317 || !qualifiedName.MatchString(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, taintKeyMessage))
		}
		if !labelValue.MatchString(t.Value) {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, taintValueMessage))
		}
	}
	return errs
}

func devices(ds []knestv1.DeviceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ds) > 8 {
		errs = append(errs, field.TooMany(path, len(ds), 8))
	}
	for i, d := range ds {
		dp := path.Index(i)
		if d.Name == "" {
			errs = append(errs, field.Required(dp.Child("name"), "the device's name inside the VM"))
		} else if len(d.Name) > 63 {
			errs = append(errs, field.TooLong(dp.Child("name"), d.Name, 63))
		}
		if d.DeviceName == "" {
			errs = append(errs, field.Required(dp.Child("deviceName"), "the resource name the host advertises, e.g. nvidia.com/GA102GL_A10"))
		} else if len(d.DeviceName) > 253 {
			errs = append(errs, field.TooLong(dp.Child("deviceName"), d.DeviceName, 253))
		} else if !ExtendedResourceName(d.DeviceName) {
			errs = append(errs, field.Invalid(dp.Child("deviceName"), d.DeviceName, deviceNameMessage))
		}
	}
	return errs
}

// ExtendedResourceName reports whether name is a Kubernetes extended resource name,
// which is what a device plugin advertises and KubeVirt requests for a GPU or host
// device: a qualified name with a domain prefix outside kubernetes.io, that stays a
// qualified name with "requests." in front (the API server's IsExtendedResourceName).
func ExtendedResourceName(name string) bool {
	return strings.Contains(name, "/") && !strings.Contains(name, "kubernetes.io/") &&
		len(apivalidation.IsQualifiedName(name)) == 0 &&
		len(apivalidation.IsQualifiedName("requests."+name)) == 0
}

func network(n *knestv1.NetworkSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	pods, podErr := cidr(n.PodCIDR, 8, 24, path.Child("podCIDR"), knestv1.DefaultPodCIDR)
	services, svcErr := cidr(n.ServiceCIDR, 12, 24, path.Child("serviceCIDR"), knestv1.DefaultServiceCIDR)
	errs = append(errs, podErr...)
	errs = append(errs, svcErr...)
	if pods.IsValid() && services.IsValid() && pods.Overlaps(services) {
		errs = append(errs, field.Invalid(path, n.PodCIDR+" and "+n.ServiceCIDR,
			"network.podCIDR and network.serviceCIDR must not overlap"))
	}
	dp := path.Child("dnsDomain")
	if len(n.DNSDomain) > 253 {
		errs = append(errs, field.TooLong(dp, n.DNSDomain, 253))
	} else if !dnsName.MatchString(n.DNSDomain) {
		errs = append(errs, field.Invalid(dp, n.DNSDomain, dnsDomainMessage))
	}
	switch n.CNI {
	case knestv1.CNIFlannel, knestv1.CNINone:
	default:
		errs = append(errs, field.NotSupported(path.Child("cni"), n.CNI, []knestv1.CNI{knestv1.CNIFlannel, knestv1.CNINone}))
	}
	return errs
}

// cidr parses an IPv4 CIDR whose prefix length lies in [minBits, maxBits]. Like the
// CRD's isCIDR, host bits may be set (10.0.0.1/16 is accepted).
func cidr(s string, minBits, maxBits int, path *field.Path, example string) (netip.Prefix, field.ErrorList) {
	if len(s) > 43 {
		return netip.Prefix{}, field.ErrorList{field.TooLong(path, s, 43)}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Bits() < minBits || p.Bits() > maxBits {
		return netip.Prefix{}, field.ErrorList{field.Invalid(path, s,
			fmt.Sprintf("must be an IPv4 CIDR with a prefix from /%d to /%d, e.g. %s", minBits, maxBits, example))}
	}
	return p.Masked(), nil
}

func apiServer(a *knestv1.APIServerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch a.ServiceType {
	case knestv1.ServiceTypeClusterIP, knestv1.ServiceTypeNodePort, knestv1.ServiceTypeLoadBalancer:
	default:
		errs = append(errs, field.NotSupported(path.Child("serviceType"), a.ServiceType,
			[]knestv1.ServiceType{knestv1.ServiceTypeClusterIP, knestv1.ServiceTypeNodePort, knestv1.ServiceTypeLoadBalancer}))
	}
	if len(a.Host) > 253 {
		errs = append(errs, field.TooLong(path.Child("host"), a.Host, 253))
	} else if a.Host != "" && !isIP(a.Host) && !dnsName.MatchString(a.Host) {
		errs = append(errs, field.Invalid(path.Child("host"), a.Host, apiHostMessage))
	}
	if len(a.CertSANs) > MaxCertSANs {
		errs = append(errs, field.TooMany(path.Child("certSANs"), len(a.CertSANs), MaxCertSANs))
	}
	for i, san := range a.CertSANs {
		if len(san) > 253 {
			errs = append(errs, field.TooLong(path.Child("certSANs").Index(i), san, 253))
		} else if !isIP(san) && !certSAN.MatchString(san) {
			errs = append(errs, field.Invalid(path.Child("certSANs").Index(i), san, certSANsMessage))
		}
	}
	return errs
}

// isIP is CEL's isIP: an IPv4 or IPv6 address without a zone.
func isIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == "" && !a.Is4In6()
}
