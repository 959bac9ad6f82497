package standin

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// reconcileVM keeps a VM's instance in line with its runStrategy, as KubeVirt's VM
// controller does: Always restarts an instance that ended, RerunOnFailure one that
// failed, Once never; Halted stops it; Manual leaves it alone. A stop is
// runStrategy Halted; a restart is deleting the VMI (the subresource API of virt-api
// is not served here).
func (s *StandIn) reconcileVM(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, req.NamespacedName, vmi); apierrors.IsNotFound(err) {
		vmi = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
		vmi = nil // someone else's VMI of the same name; KubeVirt would not adopt it either
	}

	strategy, err := vm.RunStrategy()
	if err != nil {
		return ctrl.Result{}, err
	}
	final := vmi != nil && vmi.IsFinal()
	switch {
	case vm.DeletionTimestamp != nil || strategy == kubevirtv1.RunStrategyHalted:
		if vmi != nil && vmi.DeletionTimestamp == nil {
			if err := s.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	case strategy == kubevirtv1.RunStrategyManual:
	case vmi == nil && (strategy != kubevirtv1.RunStrategyOnce || !vm.Status.Created):
		if vmi, err = s.createVMI(ctx, vm); err != nil {
			return ctrl.Result{}, err
		}
	case final && vmi.DeletionTimestamp == nil &&
		(strategy == kubevirtv1.RunStrategyAlways ||
			strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi.Status.Phase == kubevirtv1.Failed):
		// Delete the ended instance; its deletion event brings a new one.
		if err := s.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, s.updateVMStatus(ctx, vm, vmi)
}

func (s *StandIn) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachineInstance, error) {
	t := vm.Spec.Template
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        vm.Name,
			Namespace:   vm.Namespace,
			Labels:      t.ObjectMeta.Labels,
			Annotations: t.ObjectMeta.Annotations,
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if err := controllerutil.SetControllerReference(vm, vmi, s.client.Scheme()); err != nil {
		return nil, err
	}
	if err := s.client.Create(ctx, vmi); err != nil {
		return nil, err
	}
	return vmi, nil
}

func (s *StandIn) updateVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	base := vm.DeepCopy()
	st := &vm.Status
	st.Created = vmi != nil
	st.Ready = vmi != nil && vmiReady(vmi)
	switch {
	case vm.DeletionTimestamp != nil || vmi != nil && vmi.DeletionTimestamp != nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusTerminating
	case vmi == nil:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	case vmi.Status.Phase == kubevirtv1.Running:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
	case vmi.IsFinal():
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
	default:
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
	}
	ready := corev1.ConditionFalse
	if st.Ready {
		ready = corev1.ConditionTrue
	}
	st.Conditions = setVMCondition(st.Conditions, kubevirtv1.VirtualMachineCondition{
		Type: kubevirtv1.VirtualMachineReady, Status: ready, Reason: string(st.PrintableStatus),
	})
	st.ObservedGeneration = vm.Generation
	if equalJSON(base.Status, vm.Status) {
		return nil
	}
	return client.IgnoreNotFound(s.client.Status().Patch(ctx, vm, client.MergeFrom(base)))
}

func setVMCondition(conds []kubevirtv1.VirtualMachineCondition, c kubevirtv1.VirtualMachineCondition) []kubevirtv1.VirtualMachineCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status != c.Status {
				c.LastTransitionTime = metav1.Now()
			} else {
				c.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i] = c
			return conds
		}
	}
	c.LastTransitionTime = metav1.Now()
	return append(conds, c)
}

func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
