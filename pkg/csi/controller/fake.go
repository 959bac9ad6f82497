package controller

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// FakeVMs is VMs in memory, for tests where no KubeVirt runs: a hot-plug takes
// effect at once, as if virt-controller and virt-handler had done their part (the
// volume is in the VM's template and Ready in its running instance). It refuses what
// virt-api refuses: adding a volume the VM has, removing one it has not.
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

	mu      sync.Mutex
	vms     map[string]*kubevirtv1.VirtualMachine
	running map[string]bool
	failed  map[string]bool
	phases  map[string]map[string]kubevirtv1.VolumePhase
}

var _ VMs = &FakeVMs{}

func fakeKey(ns, name string) string { return ns + "/" + name }

// Add makes vm exist, running (with an instance) or not.
func (f *FakeVMs) Add(vm *kubevirtv1.VirtualMachine, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vms == nil {
		f.vms, f.running, f.failed, f.phases = map[string]*kubevirtv1.VirtualMachine{}, map[string]bool{}, map[string]bool{}, map[string]map[string]kubevirtv1.VolumePhase{}
	}
	k := fakeKey(vm.Namespace, vm.Name)
	vm = vm.DeepCopy()
	if vm.Spec.Template == nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	}
	f.vms[k], f.running[k], f.failed[k], f.phases[k] = vm, running, false, map[string]kubevirtv1.VolumePhase{}
}

// Fail ends the guest of the running VM namespace/name the way a lost or restarted
// host node does: its instance stays, Failed, with its volumes still listed, and
// nothing acts on it any more (an unplug changes the VM's spec only).
func (f *FakeVMs) Fail(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed[fakeKey(namespace, name)] = true
}

// Delete makes the VM namespace/name (and its instance) vanish.
func (f *FakeVMs) Delete(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.vms, fakeKey(namespace, name))
}

// Finish completes the hot-plugs and unplugs left in progress.
func (f *FakeVMs) Finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, phases := range f.phases {
		for name, p := range phases {
			if p == kubevirtv1.HotplugVolumeDetaching {
				delete(phases, name)
			} else {
				phases[name] = kubevirtv1.VolumeReady
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
	k := fakeKey(namespace, name)
	if _, ok := f.vms[k]; !ok || !f.running[k] {
		return nil, notFound("virtualmachineinstances", name)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Namespace, vmi.Name = namespace, name
	vmi.Status.NodeName = f.HostNode
	vmi.Status.Phase = kubevirtv1.Running
	if f.failed[k] {
		vmi.Status.Phase = kubevirtv1.Failed
	}
	for v, p := range f.phases[k] {
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: v, Phase: p})
	}
	return vmi, nil
}

func (f *FakeVMs) AddVolume(_ context.Context, namespace, name string, opts *kubevirtv1.AddVolumeOptions) error {
	f.mu.Lock()
	k := fakeKey(namespace, name)
	vm, ok := f.vms[k]
	if !ok {
		f.mu.Unlock()
		return notFound("virtualmachines", name)
	}
	spec := &vm.Spec.Template.Spec
	if slices.ContainsFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == opts.Name }) {
		f.mu.Unlock()
		return apierrors.NewBadRequest("Unable to add volume [" + opts.Name + "] because volume with that name already exists")
	}
	disk := *opts.Disk
	disk.Name = opts.Name
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, disk)
	spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: opts.Name, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: opts.VolumeSource.PersistentVolumeClaim,
	}})
	if f.running[k] && !f.failed[k] {
		f.phases[k][opts.Name] = kubevirtv1.VolumeReady
		if f.InProgress {
			f.phases[k][opts.Name] = kubevirtv1.VolumePending
		}
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
	k := fakeKey(namespace, name)
	vm, ok := f.vms[k]
	if !ok {
		f.mu.Unlock()
		return notFound("virtualmachines", name)
	}
	spec := &vm.Spec.Template.Spec
	n := len(spec.Volumes)
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == opts.Name })
	if len(spec.Volumes) == n {
		f.mu.Unlock()
		return apierrors.NewBadRequest("Unable to remove volume [" + opts.Name + "] because it does not exist")
	}
	spec.Domain.Devices.Disks = slices.DeleteFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == opts.Name })
	switch {
	case f.failed[k]:
	case f.InProgress:
		if _, ok := f.phases[k][opts.Name]; ok {
			f.phases[k][opts.Name] = kubevirtv1.HotplugVolumeDetaching
		}
	default:
		delete(f.phases[k], opts.Name)
	}
	f.Removes++
	onRemove := f.OnRemove
	f.mu.Unlock()
	if onRemove != nil {
		onRemove(name, opts.Name)
	}
	return nil
}
