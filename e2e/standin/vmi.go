package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// finalizer holds a VMI until its qemu process has ended, as KubeVirt's holds it
// until the domain is gone.
const finalizer = "kubevirt.io/foregroundDeleteVirtualMachine"

// reconcileVMI runs a VMI as a qemu process (virt-handler's part) and reports its
// phase, Ready condition and interface address.
func (s *StandIn) reconcileVMI(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, key, vmi); err != nil {
		if client.IgnoreNotFound(err) == nil {
			s.stopMachine(key, "")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vmi.DeletionTimestamp != nil {
		s.stopMachine(key, "")
		if controllerutil.RemoveFinalizer(vmi, finalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(s.client.Update(ctx, vmi))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(vmi, finalizer) {
		if err := s.client.Update(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if vmi.IsFinal() {
		s.stopMachine(key, "")
		return ctrl.Result{}, nil
	}

	s.mu.Lock()
	m := s.machines[key]
	s.mu.Unlock()
	if m != nil && m.uid != string(vmi.UID) {
		s.stopMachine(key, "") // a previous instance of the same name
		m = nil
	}
	base := vmi.DeepCopy()
	switch {
	case m == nil && vmi.Status.Phase == kubevirtv1.Running:
		// Started by an earlier stand-in whose processes died with it.
		setFinal(vmi, kubevirtv1.Failed, "the stand-in that ran this VM stopped")
	case m == nil:
		if err := s.startMachine(ctx, vmi); err != nil {
			logf.FromContext(ctx).Error(err, "failed to start the VM")
			setFinal(vmi, kubevirtv1.Failed, err.Error())
		}
	case m.exited():
		if m.exitErr == nil {
			setFinal(vmi, kubevirtv1.Succeeded, "the guest powered off")
		} else {
			setFinal(vmi, kubevirtv1.Failed, fmt.Sprintf("qemu exited: %v", m.exitErr))
		}
	}
	if equalJSON(base.Status, vmi.Status) {
		return ctrl.Result{}, nil
	}
	// The VMI CRD has no status subresource: KubeVirt writes status with the object.
	return ctrl.Result{}, s.client.Patch(ctx, vmi, client.MergeFrom(base))
}

func (s *StandIn) startMachine(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	key := client.ObjectKeyFromObject(vmi)
	m, seedVol, err := machineSpec(vmi, s.opts.ImagesDir)
	if err != nil {
		return err
	}
	m.accel = s.opts.Accel
	m.dir = s.vmDir(key)
	if err := os.RemoveAll(m.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	if m.seed, err = s.seed(ctx, vmi, seedVol, m.dir); err != nil {
		return err
	}
	owner := key.String()
	m.mac, m.tap = macFor(string(vmi.UID)), tapName(string(vmi.UID))
	ip, err := s.net.allocate(owner, m.mac)
	if err != nil {
		return err
	}
	if err := s.net.addTap(ctx, m.tap); err != nil {
		s.net.release(owner)
		return err
	}
	if err := m.start("standin:" + owner); err != nil {
		s.net.deleteTap(m.tap)
		s.net.release(owner)
		return err
	}
	s.mu.Lock()
	s.machines[key] = &running{uid: string(vmi.UID), machine: m}
	s.mu.Unlock()
	go func() {
		<-m.done
		s.exits <- event.GenericEvent{Object: vmi}
	}()

	now := metav1.Now()
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.NodeName = s.nodeName
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{
		Name: "default", InterfaceName: "eth0", MAC: m.mac, IP: ip.String(), IPs: []string{ip.String()},
	}}
	// Ready as soon as the domain runs, as KubeVirt reports it without a readiness
	// probe: the guest is still booting.
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{
		{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, LastTransitionTime: now,
			Reason: kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable, Message: "the stand-in does not migrate VMs"},
	}
	return nil
}

// seed renders the VMI's cloud-init volume; the user data comes from the Secret
// named by userDataSecretRef (key userdata or userData) or inline.
func (s *StandIn) seed(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, v *kubevirtv1.Volume, dir string) (string, error) {
	var userData, networkData []byte
	var userRef, networkRef *corev1.LocalObjectReference
	configDrive := false
	switch {
	case v == nil:
	case v.CloudInitConfigDrive != nil:
		c := v.CloudInitConfigDrive
		configDrive, userData, networkData = true, []byte(c.UserData), []byte(c.NetworkData)
		userRef, networkRef = c.UserDataSecretRef, c.NetworkDataSecretRef
	case v.CloudInitNoCloud != nil:
		c := v.CloudInitNoCloud
		userData, networkData = []byte(c.UserData), []byte(c.NetworkData)
		userRef, networkRef = c.UserDataSecretRef, c.NetworkDataSecretRef
	}
	var err error
	if userRef != nil {
		if userData, err = s.secretData(ctx, vmi.Namespace, userRef.Name, "userdata", "userData"); err != nil {
			return "", err
		}
	}
	if networkRef != nil {
		if networkData, err = s.secretData(ctx, vmi.Namespace, networkRef.Name, "networkdata", "networkData"); err != nil {
			return "", err
		}
	}
	if len(networkData) == 0 {
		networkData = nil
	}
	return writeSeed(dir, vmi, configDrive, userData, networkData)
}

func (s *StandIn) secretData(ctx context.Context, ns, name string, keys ...string) ([]byte, error) {
	sec := &corev1.Secret{}
	// Read directly: caching every Secret of the host would cost memory for nothing.
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		return nil, fmt.Errorf("cloud-init secret: %w", err)
	}
	for _, k := range keys {
		if d, ok := sec.Data[k]; ok {
			return d, nil
		}
	}
	return nil, fmt.Errorf("secret %s/%s has none of the keys %v", ns, name, keys)
}

// stopMachine ends the qemu process of key (if uid is set, only that instance's).
func (s *StandIn) stopMachine(key client.ObjectKey, uid string) {
	s.mu.Lock()
	m := s.machines[key]
	if m == nil || uid != "" && m.uid != uid {
		s.mu.Unlock()
		return
	}
	delete(s.machines, key)
	s.mu.Unlock()
	m.stop()
	s.net.deleteTap(m.tap)
	s.net.release(key.String())
}

func setFinal(vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase, msg string) {
	vmi.Status.Phase = phase
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.Now(), Reason: string(phase), Message: msg,
	}}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
