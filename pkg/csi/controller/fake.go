package controller

import (
	"context"
	"errors"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// FakeVMs is VMs in memory, for tests where no KubeVirt runs: a hot-plug takes
// effect at once, as if virt-controller and virt-handler had done their part (the
// volume is in the running instance's spec, and Ready in its status). It refuses
// what virt-api refuses: a hot-plug into an instance that does not run, adding a
// volume the instance has, removing one it has not.
type FakeVMs struct {
	// OnAdd and OnRemove, when set, are called after a hot-plug and an unplug, for
	// instance to make the disk appear in (or vanish from) a stand-in /dev/disk/by-id.
	OnAdd    func(vm string, opts *kubevirtv1.AddVolumeOptions)
	OnRemove func(vm, volume string)
	// InProgress, when set, leaves hot-plugs and unplugs unfinished in the instance.
	InProgress bool
	// HostNode, when set, is the host node every running instance is on
	// (status.nodeName).
	HostNode string
	// Adds and Removes count the AddVolume and RemoveVolume calls that got through.
	Adds, Removes int

	mu  sync.Mutex
	vms map[string]*kubevirtv1.VirtualMachine
	// instances are the VMs' instances, by the same key; none for a VM that does
	// not run.
	instances map[string]*fakeInstance
}

type fakeInstance struct {
	spec   kubevirtv1.VirtualMachineInstanceSpec
	phases map[string]kubevirtv1.VolumePhase
	failed bool
}

var _ VMs = &FakeVMs{}

func fakeKey(ns, name string) string { return ns + "/" + name }

// Add makes vm exist, running (with a new instance) or not.
func (f *FakeVMs) Add(vm *kubevirtv1.VirtualMachine, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vms == nil {
		f.vms, f.instances = map[string]*kubevirtv1.VirtualMachine{}, map[string]*fakeInstance{}
	}
	k := fakeKey(vm.Namespace, vm.Name)
	f.vms[k] = vm.DeepCopy()
	delete(f.instances, k)
	if running {
		f.instances[k] = &fakeInstance{phases: map[string]kubevirtv1.VolumePhase{}}
	}
}

// Restart replaces the instance of VM namespace/name with a new, running one, as
// KubeVirt does when a VM restarts: it has none of the old one's hot-plugged volumes.
func (f *FakeVMs) Restart(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[fakeKey(namespace, name)] = &fakeInstance{phases: map[string]kubevirtv1.VolumePhase{}}
}

// Fail ends the guest of the running VM namespace/name the way a lost or restarted
// host node does: its instance stays, Failed, with its volumes still listed, and
// nothing acts on it any more (virt-api refuses hot-plugs and unplugs).
func (f *FakeVMs) Fail(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.instances[fakeKey(namespace, name)]; in != nil {
		in.failed = true
	}
}

// Delete makes the VM namespace/name (and its instance) vanish.
func (f *FakeVMs) Delete(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey(namespace, name)
	delete(f.vms, k)
	delete(f.instances, k)
}

// Finish completes the hot-plugs and unplugs left in progress.
func (f *FakeVMs) Finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.instances {
		for name, p := range in.phases {
			if p == kubevirtv1.HotplugVolumeDetaching {
				delete(in.phases, name)
			} else {
				in.phases[name] = kubevirtv1.VolumeReady
			}
		}
	}
}

func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: kubevirtv1.SchemeGroupVersion.Group, Resource: resource}, name)
}

func (f *FakeVMs) Get(_ context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm, ok := f.vms[fakeKey(namespace, name)]
	if !ok {
		return nil, notFound("virtualmachines", name)
	}
	return vm.DeepCopy(), nil
}

func (f *FakeVMs) GetInstance(_ context.Context, namespace, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.instances[fakeKey(namespace, name)]
	if !ok {
		return nil, notFound("virtualmachineinstances", name)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: *in.spec.DeepCopy()}
	vmi.Namespace, vmi.Name = namespace, name
	vmi.Status.NodeName = f.HostNode
	vmi.Status.Phase = kubevirtv1.Running
	if in.failed {
		vmi.Status.Phase = kubevirtv1.Failed
	}
	for v, p := range in.phases {
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: v, Phase: p})
	}
	return vmi, nil
}

// running is the running instance of key, or virt-api's refusal.
func (f *FakeVMs) running(k, name string) (*fakeInstance, error) {
	in, ok := f.instances[k]
	switch {
	case !ok:
		return nil, notFound("virtualmachineinstances", name)
	case in.failed:
		return nil, apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstance"), name, errors.New("VMI is not running"))
	}
	return in, nil
}

func (f *FakeVMs) AddVolume(_ context.Context, namespace, name string, opts *kubevirtv1.AddVolumeOptions) error {
	f.mu.Lock()
	in, err := f.running(fakeKey(namespace, name), name)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	if slices.ContainsFunc(in.spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == opts.Name }) {
		f.mu.Unlock()
		return apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstance"), name, errors.New("Unable to add volume ["+opts.Name+"] because volume with that name already exists"))
	}
	disk := *opts.Disk
	disk.Name = opts.Name
	in.spec.Domain.Devices.Disks = append(in.spec.Domain.Devices.Disks, disk)
	in.spec.Volumes = append(in.spec.Volumes, kubevirtv1.Volume{Name: opts.Name, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: opts.VolumeSource.PersistentVolumeClaim,
	}})
	in.phases[opts.Name] = kubevirtv1.VolumeReady
	if f.InProgress {
		in.phases[opts.Name] = kubevirtv1.VolumePending
	}
	f.Adds++
	onAdd := f.OnAdd
	f.mu.Unlock()
	if onAdd != nil {
		onAdd(name, opts)
	}
	return nil
}

func (f *FakeVMs) RemoveVolume(_ context.Context, namespace, name string, opts *kubevirtv1.RemoveVolumeOptions) error {
	f.mu.Lock()
	in, err := f.running(fakeKey(namespace, name), name)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	n := len(in.spec.Volumes)
	in.spec.Volumes = slices.DeleteFunc(in.spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == opts.Name })
	if len(in.spec.Volumes) == n {
		f.mu.Unlock()
		return apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstance"), name, errors.New("Unable to remove volume ["+opts.Name+"] because it does not exist"))
	}
	in.spec.Domain.Devices.Disks = slices.DeleteFunc(in.spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == opts.Name })
	if f.InProgress {
		in.phases[opts.Name] = kubevirtv1.HotplugVolumeDetaching
	} else {
		delete(in.phases, opts.Name)
	}
	f.Removes++
	onRemove := f.OnRemove
	f.mu.Unlock()
	if onRemove != nil {
		onRemove(name, opts.Name)
	}
	return nil
}
