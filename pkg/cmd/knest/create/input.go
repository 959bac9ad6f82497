package create

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/cmd/knest/internal/printers"
	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/scale"
	"github.com/knest-dev/knest/pkg/validation"
)

// commandFlags say what the command does, not what the cluster is; -f replaces every
// other flag of create's own.
var commandFlags = map[string]bool{"filename": true, "dry-run": true, "output": true, "show-graph": true, "wait": true, "timeout": true}

// clusterFromInput turns the arguments and flags into a NestedCluster and checks it
// against the CRD's rules. It does not contact the host cluster, except to read the
// current namespace from the kubeconfig.
func clusterFromInput(cmd *cobra.Command, streams genericiooptions.IOStreams, flags *flagpole, args []string) (*knestv1.NestedCluster, error) {
	if err := checkModeFlags(cmd, flags); err != nil {
		return nil, err
	}
	var nc *knestv1.NestedCluster
	var err error
	if flags.File != "" {
		nc, err = fromFile(cmd, streams.In, flags.File, args)
	} else {
		nc, err = fromFlags(cmd, flags, args)
	}
	if err != nil {
		return nil, err
	}

	ns, explicit, err := cmdutil.Namespace(cmd)
	switch {
	case err != nil && !flags.DryRun:
		return nil, err
	case err != nil:
		ns = "default" // a dry run needs no kubeconfig
	}
	switch {
	case nc.Namespace == "":
		nc.Namespace = ns
	case explicit && nc.Namespace != ns:
		return nil, fmt.Errorf("the manifest's namespace %q differs from --namespace %q; drop one of them", nc.Namespace, ns)
	}

	errs := validation.NestedCluster(nc)
	if len(errs) == 0 {
		return nc, nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		if flag := flagFor(e.Field); flag != "" && flags.File == "" {
			msgs = append(msgs, flag+": "+e.ErrorBody())
		} else {
			msgs = append(msgs, e.Error())
		}
	}
	return nil, &knest.InvalidError{Name: nc.Name, Problems: msgs}
}

// checkModeFlags checks the flags that pick what the command does.
func checkModeFlags(cmd *cobra.Command, flags *flagpole) error {
	if !flags.DryRun {
		switch {
		case cmd.Flags().Changed("output"):
			return errors.New("-o/--output only applies with --dry-run; a real create prints progress, then `knest get` shows the cluster")
		case flags.ShowGraph:
			return errors.New("--show-graph only applies with --dry-run")
		}
	}
	if err := cmdutil.CheckOutput(flags.Output, printers.YAML, printers.JSON); err != nil {
		return err
	}
	if flags.File != "" {
		var set []string
		cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Changed && !commandFlags[f.Name] {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("-f takes the whole cluster from the manifest; remove %s or edit the manifest instead", strings.Join(set, ", "))
		}
	}
	return nil
}

// fromFlags builds a NestedCluster from the flags. Values the flags leave unset stay
// unset, so the API server's defaults apply.
func fromFlags(cmd *cobra.Command, flags *flagpole, args []string) (*knestv1.NestedCluster, error) {
	if len(args) != 1 {
		return nil, errors.New("a cluster needs a name: knest create NAME")
	}
	changed := cmd.Flags().Changed
	nc := &knestv1.NestedCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: knestv1.GroupVersion.String(), Kind: "NestedCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: args[0]},
	}
	s := &nc.Spec
	s.Version = flags.Version
	if changed("version") && !strings.HasPrefix(flags.Version, "v") {
		s.Version = "v" + flags.Version
	}

	if flags.ControlPlane <= 0 {
		return nil, fmt.Errorf("--control-plane %d: the control plane needs 1, 3, 5 or 7 nodes", flags.ControlPlane)
	}
	s.ControlPlane.Replicas = flags.ControlPlane
	switch strings.ToLower(flags.ControlPlaneMode) {
	case "", "vm":
		if changed("control-plane-mode") {
			s.ControlPlane.Mode = knestv1.ControlPlaneVM
		}
	case "hosted":
		s.ControlPlane.Mode = knestv1.ControlPlaneHosted
		if flags.ControlPlane != 1 && flags.ControlPlane != 3 {
			return nil, fmt.Errorf("--control-plane %d: a hosted control plane runs 1 or 3 API servers", flags.ControlPlane)
		}
		for _, name := range []string{"control-plane-cpu", "control-plane-memory"} {
			if changed(name) {
				return nil, fmt.Errorf("--%s sizes control-plane VMs; a hosted control plane has none (use a manifest's spec.controlPlane.hosted.resources)", name)
			}
		}
	default:
		return nil, fmt.Errorf("--control-plane-mode %q: use vm (control-plane VMs) or hosted (control-plane pods on the host)", flags.ControlPlaneMode)
	}
	if changed("control-plane-cpu") && flags.ControlPlaneCPU < 2 {
		return nil, fmt.Errorf("--control-plane-cpu %d: a control-plane node needs at least 2 vCPUs (kubeadm refuses fewer)", flags.ControlPlaneCPU)
	}
	s.ControlPlane.CPU = flags.ControlPlaneCPU
	var err error
	if s.ControlPlane.Memory, err = quantityFlag("control-plane-memory", flags.ControlPlaneMemory, validation.MemoryQuantityMessage, "4Gi"); err != nil {
		return nil, err
	}

	machine := knestv1.MachineSpec{Image: flags.Image}
	if changed("worker-cpu") && flags.WorkerCPU < 1 {
		return nil, fmt.Errorf("--worker-cpu %d: a worker node needs at least 1 vCPU", flags.WorkerCPU)
	}
	machine.CPU = flags.WorkerCPU
	if machine.Memory, err = quantityFlag("worker-memory", flags.WorkerMemory, validation.MemoryQuantityMessage, "4Gi"); err != nil {
		return nil, err
	}
	if machine.RootDisk, err = rootDisk(flags.RootDisk, flags.DiskSize); err != nil {
		return nil, err
	}
	if s.ControlPlane.Mode != knestv1.ControlPlaneHosted { // --image and --root-disk: every VM, the workers' alone when hosted
		s.ControlPlane.Image = flags.Image
		s.ControlPlane.RootDisk = machine.RootDisk
	}
	s.ControlPlane.Etcd = knestv1.EtcdSpec{Members: flags.EtcdMembers, StorageClassName: flags.EtcdStorageClass, Ephemeral: flags.EtcdEphemeral}
	s.Providers.LoadBalancer.Disabled = flags.NoLoadBalancer
	s.Providers.Storage.Disabled = flags.NoStorage
	for i, c := range flags.StorageClasses {
		name, host, _ := strings.Cut(c, "=")
		s.Providers.Storage.Classes = append(s.Providers.Storage.Classes, knestv1.TenantStorageClass{Name: name, HostStorageClassName: host, Default: i == 0})
	}
	if s.ControlPlane.Etcd.Size, err = quantityFlag("etcd-size", flags.EtcdSize, "is not a size: use a quantity such as 4Gi", "4Gi"); err != nil {
		return nil, err
	}

	pools, err := scale.ParsePoolSizes(flags.Pools)
	if err != nil {
		return nil, fmt.Errorf("--pool: %w", err)
	}
	if flags.Workers < 0 {
		return nil, fmt.Errorf("--workers %d: a pool has from 0 to %d nodes", flags.Workers, validation.MaxPoolReplicas)
	}
	autoscale, autoscaled, err := autoscaleFlag(changed("workers"), flags.Autoscale, pools)
	if err != nil {
		return nil, err
	}
	// --workers makes the default pool unless only --pool or --autoscale of other
	// pools were given.
	_, defaultAutoscaled := autoscale[knestv1.DefaultPoolName]
	if changed("workers") || defaultAutoscaled || len(flags.Pools) == 0 && len(autoscale) == 0 {
		if _, dup := pools[knestv1.DefaultPoolName]; dup {
			return nil, fmt.Errorf("--workers and --pool %s=... both size the pool %s; use one of them", knestv1.DefaultPoolName, knestv1.DefaultPoolName)
		}
		s.Workers = append(s.Workers, pool(knestv1.DefaultPoolName, flags.Workers, machine))
	}
	for _, name := range flags.Pools {
		name, _, _ = strings.Cut(name, "=")
		s.Workers = append(s.Workers, pool(name, pools[name], machine))
	}
	for _, name := range autoscaled {
		if name != knestv1.DefaultPoolName {
			s.Workers = append(s.Workers, pool(name, 0, machine))
		}
	}
	for i := range s.Workers {
		if a, ok := autoscale[s.Workers[i].Name]; ok {
			s.Workers[i].Replicas, s.Workers[i].Autoscaling = nil, a
		}
	}

	s.Network = knestv1.NetworkSpec{PodCIDR: flags.PodCIDR, ServiceCIDR: flags.ServiceCIDR, DNSDomain: flags.DNSDomain}
	if s.Network.CNI, err = enumFlag("cni", flags.CNI, knestv1.CNIFlannel, knestv1.CNINone); err != nil {
		return nil, err
	}
	s.APIServer = knestv1.APIServerSpec{Host: flags.APIHost, CertSANs: flags.CertSANs}
	if s.APIServer.ServiceType, err = enumFlag("service-type", flags.ServiceType,
		knestv1.ServiceTypeClusterIP, knestv1.ServiceTypeNodePort, knestv1.ServiceTypeLoadBalancer); err != nil {
		return nil, err
	}
	for _, san := range flags.CertSANs {
		if strings.TrimSpace(san) == "" || strings.ContainsAny(san, " ,/") {
			return nil, fmt.Errorf("--cert-san %q: give one DNS name or IP per flag, without spaces, commas or slashes", san)
		}
	}
	return nc, nil
}

// autoscaleFlag parses --autoscale for a new cluster: bounds by pool name (a bare
// MIN:MAX is the default pool's), and the pools in the order the flags name them. A
// pool gets either a size (--workers, --pool) or bounds, and a new pool has no
// autoscaling to turn off.
func autoscaleFlag(workersSet bool, values []string, sized map[string]int32) (map[string]*knestv1.PoolAutoscaling, []string, error) {
	parsed, err := scale.ParseAutoscale(values)
	if err != nil {
		return nil, nil, fmt.Errorf("--autoscale: %w", err)
	}
	out := map[string]*knestv1.PoolAutoscaling{}
	var order []string
	for _, v := range values {
		name, _, named := strings.Cut(v, "=")
		key := name
		if !named {
			key, name = "", knestv1.DefaultPoolName
		}
		a := parsed[key]
		switch {
		case a == nil:
			return nil, nil, fmt.Errorf("--autoscale %s: a new pool is autoscaled only when --autoscale gives its bounds, e.g. %s=0:4; leave it out", v, name)
		case out[name] != nil:
			return nil, nil, fmt.Errorf("--autoscale: pool %s's autoscaling is given twice", name)
		case name == knestv1.DefaultPoolName && workersSet:
			return nil, nil, fmt.Errorf("--workers sizes the pool %s and --autoscale %s lets the autoscaler size it; use one of them", name, v)
		}
		if _, both := sized[name]; both {
			return nil, nil, fmt.Errorf("--pool %s=... sizes the pool %s and --autoscale %s lets the autoscaler size it; use one of them (--autoscale adds the pool too)", name, name, v)
		}
		out[name] = a
		order = append(order, name)
	}
	return out, order, nil
}

func pool(name string, replicas int32, m knestv1.MachineSpec) knestv1.WorkerPool {
	m = *m.DeepCopy()
	return knestv1.WorkerPool{Name: name, Replicas: &replicas, MachineSpec: m}
}

// quantityFlag parses a quantity flag; empty means unset. notQuantity is the CRD's
// message for a value that does not parse.
func quantityFlag(name, value, notQuantity, example string) (*resource.Quantity, error) {
	if value == "" {
		return nil, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %s", name, value, notQuantity)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("--%s %q must be positive, e.g. %s", name, value, example)
	}
	return &q, nil
}

func rootDisk(kind, size string) (knestv1.RootDiskSpec, error) {
	var rd knestv1.RootDiskSpec
	switch strings.ToLower(kind) {
	case "":
	case "containerdisk":
		rd.Type = knestv1.RootDiskContainerDisk
	case "datavolume":
		rd.Type = knestv1.RootDiskDataVolume
	default:
		return rd, fmt.Errorf("--root-disk %q: use containerdisk (ephemeral) or datavolume (persistent)", kind)
	}
	if size != "" {
		if rd.Type != knestv1.RootDiskDataVolume {
			return rd, errors.New("--disk-size only applies with --root-disk datavolume; a containerdisk has the size of its image")
		}
		q, err := quantityFlag("disk-size", size, validation.DiskSizeQuantityMessage, "20Gi")
		if err != nil {
			return rd, err
		}
		rd.Size = q
	}
	if rd.Type == knestv1.RootDiskDataVolume && rd.Size == nil {
		return rd, errors.New("--root-disk datavolume needs --disk-size, e.g. --disk-size 20Gi")
	}
	return rd, nil
}

// enumFlag matches value case-insensitively against allowed; empty stays empty.
func enumFlag[T ~string](name, value string, allowed ...T) (T, error) {
	if value == "" {
		return "", nil
	}
	names := make([]string, 0, len(allowed))
	for _, a := range allowed {
		if strings.EqualFold(value, string(a)) {
			return a, nil
		}
		names = append(names, string(a))
	}
	return "", fmt.Errorf("--%s %q: use one of %s", name, value, strings.Join(names, ", "))
}

// flagFor names the flag that sets a spec field, for messages that say what to change.
func flagFor(path string) string {
	prefixes := []struct{ prefix, flag string }{
		// metadata.name is a prefix of metadata.namespace: the longer one first.
		{"metadata.namespace", "--namespace"},
		{"metadata.name", "NAME"},
		{"spec.version", "--version"},
		{"spec.controlPlane.replicas", "--control-plane"},
		{"spec.controlPlane.mode", "--control-plane-mode"},
		{"spec.controlPlane.cpu", "--control-plane-cpu"},
		{"spec.controlPlane.memory", "--control-plane-memory"},
		{"spec.controlPlane.image", "--image"},
		{"spec.controlPlane.rootDisk", "--root-disk/--disk-size"},
		{"spec.controlPlane.etcd.size", "--etcd-size"},
		{"spec.controlPlane.etcd.members", "--etcd-members"},
		{"spec.controlPlane.etcd", "--etcd-storage-class/--etcd-size/--etcd-ephemeral/--etcd-members"},
		{"spec.network.podCIDR", "--pod-cidr"},
		{"spec.network.serviceCIDR", "--service-cidr"},
		{"spec.network.dnsDomain", "--dns-domain"},
		{"spec.network.cni", "--cni"},
		{"spec.apiServer.serviceType", "--service-type"},
		{"spec.apiServer.host", "--api-host"},
		{"spec.apiServer.certSANs", "--cert-san"},
		{"spec.workers", "--pool"},
		{"spec.network", "--pod-cidr/--service-cidr"},
	}
	if strings.HasPrefix(path, "spec.workers[") {
		for _, suffix := range []struct{ field, flag string }{
			{".cpu", "--worker-cpu"}, {".memory", "--worker-memory"}, {".image", "--image"},
			{".rootDisk", "--root-disk/--disk-size"}, {".replicas", "--workers/--pool"}, {".name", "--pool"},
			{".autoscaling", "--autoscale"},
		} {
			if strings.Contains(path, "]"+suffix.field) {
				return suffix.flag
			}
		}
	}
	for _, p := range prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.flag
		}
	}
	return ""
}
