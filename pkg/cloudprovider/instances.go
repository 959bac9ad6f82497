package cloudprovider

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	cloudprovider "k8s.io/cloud-provider"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// instances is the provider's cloudprovider.InstancesV2: a tenant Node is the
// VirtualMachine of the same name (or of its kubevirt:// provider ID) in the
// tenant's host namespace, and that VM's VirtualMachineInstance while it runs.
type instances struct {
	p *Provider
}

var _ cloudprovider.InstancesV2 = &instances{}

// InstanceExists is false when the Node's VM is gone (or belongs to another
// cluster), so that the cloud node lifecycle controller deletes the Node.
func (i *instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	vm, err := i.vm(ctx, node)
	return vm != nil, err
}

// InstanceShutdown is true when the Node's VM exists but does not run: it has no
// VMI (stopped) or its VMI has ended. A VMI still starting is not shut down.
func (i *instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	vm, err := i.vm(ctx, node)
	if err != nil || vm == nil {
		return false, err
	}
	vmi, err := i.vmi(ctx, vm.Name)
	if err != nil {
		return false, err
	}
	if vmi == nil {
		return true, nil
	}
	return vmi.IsFinal(), nil
}

// InstanceMetadata returns CAPK's provider ID for the Node and the addresses its
// VMI reports on the interfaces the VMI declares (not guest-internal ones such as
// a CNI's bridges). The VM's instance type names the instance type when it has one.
func (i *instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	vm, err := i.vm(ctx, node)
	if err != nil {
		return nil, err
	}
	if vm == nil {
		return nil, cloudprovider.InstanceNotFound
	}
	md := &cloudprovider.InstanceMetadata{ProviderID: providerIDPrefix + vm.Name}
	if vm.Spec.Instancetype != nil {
		md.InstanceType = vm.Spec.Instancetype.Name
	}
	vmi, err := i.vmi(ctx, vm.Name)
	if err != nil {
		return nil, err
	}
	if vmi != nil {
		md.NodeAddresses = nodeAddresses(vmi)
	}
	md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: node.Name})
	return md, nil
}

// vm returns the Node's VM, nil if there is none in the tenant's namespace with the
// tenant's cluster label.
func (i *instances) vm(ctx context.Context, node *corev1.Node) (*kubevirtv1.VirtualMachine, error) {
	vm := &kubevirtv1.VirtualMachine{}
	key := client.ObjectKey{Namespace: i.p.opts.Namespace, Name: vmName(node)}
	if err := i.p.opts.Host.Get(ctx, key, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read VirtualMachine %s of Node %s: %w", key, node.Name, err)
	}
	if vm.Labels[capiClusterLabel] != i.p.opts.ClusterName {
		return nil, nil
	}
	return vm, nil
}

func (i *instances) vmi(ctx context.Context, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	key := client.ObjectKey{Namespace: i.p.opts.Namespace, Name: name}
	if err := i.p.opts.Host.Get(ctx, key, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read VirtualMachineInstance %s: %w", key, err)
	}
	return vmi, nil
}

// nodeAddresses are the internal IPs the VMI reports on its declared interfaces.
func nodeAddresses(vmi *kubevirtv1.VirtualMachineInstance) []corev1.NodeAddress {
	declared := map[string]bool{}
	for _, n := range vmi.Spec.Networks {
		declared[n.Name] = true
	}
	var out []corev1.NodeAddress
	seen := map[string]bool{}
	for _, iface := range vmi.Status.Interfaces {
		if !declared[iface.Name] {
			continue
		}
		for _, ip := range append([]string{iface.IP}, iface.IPs...) {
			if ip == "" || seen[ip] {
				continue
			}
			seen[ip] = true
			out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
	return out
}
