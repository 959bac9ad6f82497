package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VMs is what the controller service needs of KubeVirt. Errors are Kubernetes API
// errors (apierrors.IsNotFound works on them).
type VMs interface {
	// Get returns the VirtualMachine namespace/name.
	Get(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error)
	// GetInstance returns the running VirtualMachineInstance namespace/name.
	GetInstance(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachineInstance, error)
	// AddVolume hot-plugs a volume into the VM's running instance only: the VM's
	// spec does not get it, so the VM's next instance starts without it (package
	// csi says why).
	AddVolume(ctx context.Context, namespace, vm string, opts *kubevirtv1.AddVolumeOptions) error
	// RemoveVolume unplugs a hot-plugged volume from the VM's running instance.
	RemoveVolume(ctx context.Context, namespace, vm string, opts *kubevirtv1.RemoveVolumeOptions) error
}

// SubresourceGroupVersion is where KubeVirt's virt-api serves the VM subresources.
var SubresourceGroupVersion = schema.GroupVersion{Group: "subresources.kubevirt.io", Version: "v1"}

// NewVMs returns the VMs of the host cluster that cfg talks to: reads through c
// (whose scheme must know KubeVirt's types), hot-plugs through virt-api's
// virtualmachineinstances/addvolume and removevolume subresources (which KubeVirt's
// HotplugVolumes feature gate allows on a VM's instance).
func NewVMs(cfg *rest.Config, c client.Reader) (VMs, error) {
	rc := rest.CopyConfig(cfg)
	rc.GroupVersion = &SubresourceGroupVersion
	rc.APIPath = "/apis"
	rc.ContentType = "application/json"
	rc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	r, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to create a client of %s: %w", SubresourceGroupVersion, err)
	}
	return &hostVMs{c: c, rest: r}, nil
}

type hostVMs struct {
	c    client.Reader
	rest rest.Interface
}

func (h *hostVMs) Get(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error) {
	vm := &kubevirtv1.VirtualMachine{}
	return vm, h.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vm)
}

func (h *hostVMs) GetInstance(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	return vmi, h.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vmi)
}

func (h *hostVMs) AddVolume(ctx context.Context, namespace, vm string, opts *kubevirtv1.AddVolumeOptions) error {
	return h.put(ctx, namespace, vm, "addvolume", opts)
}

func (h *hostVMs) RemoveVolume(ctx context.Context, namespace, vm string, opts *kubevirtv1.RemoveVolumeOptions) error {
	return h.put(ctx, namespace, vm, "removevolume", opts)
}

func (h *hostVMs) put(ctx context.Context, namespace, vm, subresource string, opts any) error {
	body, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	return h.rest.Put().Namespace(namespace).Resource("virtualmachineinstances").Name(vm).SubResource(subresource).
		Body(body).Do(ctx).Error()
}

// hasVolume reports whether the instance vmi has the volume name in its spec: plugged,
// being plugged, or not yet unplugged.
func hasVolume(vmi *kubevirtv1.VirtualMachineInstance, name string) bool {
	return slices.ContainsFunc(vmi.Spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == name })
}

// volumePhase is the phase of the volume name in the running vmi, "" when the VMI
// does not list it.
func volumePhase(vmi *kubevirtv1.VirtualMachineInstance, name string) (kubevirtv1.VolumePhase, bool) {
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == name {
			return s.Phase, true
		}
	}
	return "", false
}

// hotplugOptions are the addvolume options of volume id: the host PVC of that name
// as a hot-pluggable SCSI disk whose serial is serial.
func hotplugOptions(id, serial string) *kubevirtv1.AddVolumeOptions {
	return &kubevirtv1.AddVolumeOptions{
		Name: id,
		Disk: &kubevirtv1.Disk{
			Name:   id,
			Serial: serial,
			DiskDevice: kubevirtv1.DiskDevice{
				Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI},
			},
		},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: id},
				Hotpluggable:                      true,
			},
		},
	}
}
