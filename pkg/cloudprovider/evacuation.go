package cloudprovider

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EvacuatedAnnotation on a tenant Node is the UID of its VMI that KubeVirt asked to
// leave its host node (status.evacuationNodeName, set when a host drain meets the
// VM's External eviction strategy). CAPK then cordons and drains the Node, deletes
// the VMI, and KubeVirt starts the VM again on another host node: the same Node
// comes back, still cordoned, for nothing in CAPK or Cluster API uncordons it.
// UncordonEvacuated does, once a newer VMI runs the Node and its kubelet reported
// Ready since. A Node a person cordoned has no annotation and keeps its cordon.
const EvacuatedAnnotation = "knest.dev/evacuated-vmi"

// UncordonEvacuated marks the tenant Nodes (of nodes) whose VMI is being evacuated,
// and uncordons those whose VM runs again elsewhere.
func (p *Provider) UncordonEvacuated(ctx context.Context, nodes []*corev1.Node) error {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := p.opts.Host.List(ctx, vmis, client.InNamespace(p.opts.Namespace), client.MatchingLabels{capiClusterLabel: p.opts.ClusterName}); err != nil {
		return fmt.Errorf("failed to list the tenant's VMIs: %w", err)
	}
	byName := map[string]*kubevirtv1.VirtualMachineInstance{}
	for i := range vmis.Items {
		byName[vmis.Items[i].Name] = &vmis.Items[i]
	}
	for _, node := range nodes {
		vmi := byName[vmName(node)]
		if vmi == nil {
			continue
		}
		marked, ok := node.Annotations[EvacuatedAnnotation]
		switch {
		case vmi.Status.EvacuationNodeName != "" && marked != string(vmi.UID):
			if err := p.patchNode(ctx, node.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{EvacuatedAnnotation: string(vmi.UID)}}}); err != nil {
				return err
			}
		case ok && marked != string(vmi.UID) && vmi.Status.Phase == kubevirtv1.Running && readySince(node, vmi.CreationTimestamp):
			patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{EvacuatedAnnotation: nil}}}
			if node.Spec.Unschedulable {
				patch["spec"] = map[string]any{"unschedulable": nil}
			}
			if err := p.patchNode(ctx, node.Name, patch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Provider) patchNode(ctx context.Context, name string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := p.opts.Tenant.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to patch tenant Node %s: %w", name, err)
	}
	return nil
}

// readySince: the Node's kubelet reported it Ready after t (a heartbeat from the
// kubelet of the VM's new boot, not the Ready left by the old one).
func readySince(node *corev1.Node, t metav1.Time) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(t.Time)
		}
	}
	return false
}
