//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/hosted"
)

// stateMarker is an object written into a tenant before a fault; the tenant kept its
// state when it is there after.
func writeStateMarker(t *testing.T, tc tenant, value string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "knest-e2e-state", Namespace: "default"}, Data: map[string]string{"value": value}}
	NewWithT(t).Eventually(func() error {
		err := tc.Create(t.Context(), cm.DeepCopy())
		if err != nil && client.IgnoreAlreadyExists(err) == nil {
			cur := &corev1.ConfigMap{}
			if err := tc.Get(t.Context(), client.ObjectKeyFromObject(cm), cur); err != nil {
				return err
			}
			cur.Data = cm.Data
			return tc.Update(t.Context(), cur)
		}
		return err
	}, tenantTimeout, poll).Should(Succeed())
	return cm
}

// expectStateMarker waits until the tenant's API answers with the marker and
// returns how long that took from start.
func expectStateMarker(t *testing.T, tc tenant, cm *corev1.ConfigMap, start time.Time) time.Duration {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		got := &corev1.ConfigMap{}
		g.Expect(tc.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
		g.Expect(got.Data).To(Equal(cm.Data))
	}, tenantTimeout, 2*time.Second).Should(Succeed(), "the tenant lost the object written before the fault")
	return time.Since(start)
}

// expectTenantStateKept: the NestedCluster knows the tenant as the cluster it first
// saw, and says its etcd is persistent.
func expectTenantStateKept(t *testing.T, key client.ObjectKey, tc tenant) {
	t.Helper()
	g := NewWithT(t)
	kubeSystem := &corev1.Namespace{}
	// A poll: through a NodePort or a port-forward one request can time out.
	g.Eventually(func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return tc.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, kubeSystem)
	}, tenantTimeout, 2*time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		nc := &knestv1.NestedCluster{}
		g.Expect(s.host.Get(t.Context(), key, nc)).To(Succeed())
		g.Expect(nc.Status.TenantID).To(Equal(string(kubeSystem.UID)))
		g.Expect(conditions.IsTrue(nc, knestv1.TenantStateCondition)).To(BeTrue(), "conditions: %+v", nc.Status.Conditions)
		g.Expect(conditions.IsTrue(nc, knestv1.EtcdPersistentCondition)).To(BeTrue(), "conditions: %+v", nc.Status.Conditions)
	}, tenantTimeout, poll).Should(Succeed())
}

// expectHostedEtcdSurvives deletes a hosted tenant's etcd pods, all at once, then
// its StatefulSet: each time the tenant comes back with the object written before,
// on the same volumes, and its nodes stay Ready.
func expectHostedEtcdSurvives(t *testing.T, key client.ObjectKey, tc tenant, nodes int) {
	g := NewWithT(t)
	ctx := t.Context()
	const step = "hosted etcd lost"
	expectTenantStateKept(t, key, tc)
	nc := &knestv1.NestedCluster{}
	g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
	members := max(1, int(nc.Spec.ControlPlane.Etcd.Members))
	claims := func() map[string]string {
		list := &corev1.PersistentVolumeClaimList{}
		g.Expect(s.host.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels(hosted.EtcdClaimSelector(key.Name)))).To(Succeed())
		out := map[string]string{}
		for _, c := range list.Items {
			if hosted.IsEtcdClaim(key.Name, c.Name) {
				out[c.Name] = string(c.UID)
			}
		}
		return out
	}
	before := claims()
	g.Expect(before).To(HaveLen(members), "a claim per etcd member")

	etcdPods := client.MatchingLabels{hosted.ComponentLabel: hosted.ComponentEtcd}
	// newEtcdReady waits for every member's pod ready, none of them one of old: the
	// object is read only from an etcd that started again (a terminating one still
	// serves).
	newEtcdReady := func(old map[string]bool) {
		g.Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(s.host.List(ctx, pods, client.InNamespace(key.Namespace), etcdPods)).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(members))
			for _, p := range pods.Items {
				g.Expect(old).NotTo(HaveKey(string(p.UID)), "the old etcd pod %s is still there", p.Name)
				g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod %s", p.Name)
			}
		}, tenantTimeout, 2*time.Second).Should(Succeed())
	}
	podUIDs := func() map[string]bool {
		pods := &corev1.PodList{}
		g.Expect(s.host.List(ctx, pods, client.InNamespace(key.Namespace), etcdPods)).To(Succeed())
		out := map[string]bool{}
		for _, p := range pods.Items {
			out[string(p.UID)] = true
		}
		return out
	}

	cm := writeStateMarker(t, tc, "before the etcd pods were deleted")
	old := podUIDs()
	start := time.Now()
	// At once, as a crash: no graceful shutdown.
	g.Expect(s.host.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(key.Namespace), etcdPods, client.GracePeriodSeconds(0))).To(Succeed())
	newEtcdReady(old)
	s.timeline.add(step, fmt.Sprintf("every etcd pod deleted: new ones ready (%d)", members), time.Since(start))
	s.timeline.add(step, "every etcd pod deleted: the object is back", expectStateMarker(t, tc, cm, start))

	cm = writeStateMarker(t, tc, "before the etcd StatefulSet was deleted")
	old = podUIDs()
	start = time.Now()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: hosted.EtcdName(key.Name)}}
	g.Expect(s.host.Delete(ctx, sts)).To(Succeed())
	newEtcdReady(old)
	s.timeline.add(step, fmt.Sprintf("the etcd StatefulSet deleted: new pods ready (%d)", members), time.Since(start))
	s.timeline.add(step, "the etcd StatefulSet deleted: the object is back", expectStateMarker(t, tc, cm, start))
	g.Expect(claims()).To(Equal(before), "etcd's volumes were not the ones it had")

	expectNodesReady(t, tc, nodes)
	expectTenantStateKept(t, key, tc)
}

// expectControlPlaneSurvivesQemuKill kills the qemu of a VM tenant's only
// control-plane VM. KubeVirt restarts the VM from a fresh copy of its container
// disk with a new address; its etcd disk comes back with it, so `kubeadm init`
// renders the control plane around the tenant's data: the object written before is
// there, the nodes are Ready again, and status knows it as the same cluster.
func expectControlPlaneSurvivesQemuKill(t *testing.T, key client.ObjectKey, nodes int) {
	g := NewWithT(t)
	ctx := t.Context()
	const step = "control-plane qemu killed"
	tc := tenantClient(t, key)
	expectTenantStateKept(t, key, tc)
	cm := writeStateMarker(t, tc, "before the control plane's qemu was killed")

	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	g.Expect(s.host.List(ctx, vmis, client.InNamespace(key.Namespace), client.MatchingLabels{"cluster.x-k8s.io/role": "control-plane"})).To(Succeed())
	g.Expect(vmis.Items).To(HaveLen(1))
	victim := vmis.Items[0]
	pods := &corev1.PodList{}
	g.Expect(s.host.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(victim.UID)})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "virt-launcher pods of %s", victim.Name)
	start := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	hangs := resetHungGuests(watchCtx, key, step, start)
	out, err := execInPod(ctx, &pods.Items[0], "compute", "pkill", "-KILL", "-e", "qemu-system")
	g.Expect(err).NotTo(HaveOccurred(), "killing qemu in %s: %s", pods.Items[0].Name, out)
	s.timeline.add(step, string(killQemu), 0)

	g.Eventually(func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(s.host.Get(ctx, client.ObjectKeyFromObject(&victim), vmi)).To(Succeed())
		g.Expect(vmi.UID).NotTo(Equal(victim.UID))
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, createTimeout, poll).Should(Succeed(), "KubeVirt did not restart the control-plane VM")
	s.timeline.add(step, "VM running again", time.Since(start))
	s.timeline.add(step, "the tenant API answers with the object", expectStateMarker(t, tc, cm, start))
	expectNodesReady(t, tc, nodes)
	s.timeline.add(step, fmt.Sprintf("all nodes Ready (%d)", nodes), time.Since(start))
	expectTenantStateKept(t, key, tc)
	logResets(t, hangs)
}

// logResets says which hung guests a step reset (resetHungGuests).
func logResets(t *testing.T, w *hangWatch) {
	for _, r := range w.resets() {
		t.Logf("reset under emulation: %s", r)
	}
}

// expectBackupRestore takes a snapshot with `knest backup`, changes the tenant
// (the object written before deleted, another written), and brings it back with
// `knest restore`: the object is there again, the later one is not, the nodes are
// Ready and status knows the tenant as the same cluster.
func expectBackupRestore(t *testing.T, key client.ObjectKey, tc tenant, nodes int) {
	g := NewWithT(t)
	ctx := t.Context()
	const step = "backup and restore"
	expectTenantStateKept(t, key, tc)
	cm := writeStateMarker(t, tc, "before the backup")
	start := time.Now()
	out, err := knestCmd(t, ctx, "backup", key.Name, "-n", key.Namespace)
	g.Expect(err).NotTo(HaveOccurred(), "knest backup")
	snap := strings.TrimSpace(out)
	s.timeline.add(step, "knest backup returned "+snap, time.Since(start))
	nc := &knestv1.NestedCluster{}
	g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
	g.Expect(nc.Status.Backup.LastSnapshot).NotTo(BeNil())
	g.Expect(nc.Status.Backup.LastSnapshot.Name).To(Equal(snap))
	g.Expect(nc.Status.Backup.Snapshots).To(ContainElement(snap))

	later := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "knest-e2e-after-backup", Namespace: "default"}}
	g.Eventually(func() error {
		return client.IgnoreAlreadyExists(tc.Create(ctx, later.DeepCopy()))
	}, tenantTimeout, poll).Should(Succeed())
	g.Eventually(func() error {
		return client.IgnoreNotFound(tc.Delete(ctx, cm.DeepCopy()))
	}, tenantTimeout, poll).Should(Succeed())

	start = time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	hangs := resetHungGuests(watchCtx, key, step, start) // a VM control plane boots again
	defer logResets(t, hangs)
	_, err = knestCmd(t, ctx, "restore", key.Name, "-n", key.Namespace, "--from", snap, "--timeout", createTimeout.String())
	g.Expect(err).NotTo(HaveOccurred(), "knest restore")
	s.timeline.add(step, "knest restore returned (Ready)", time.Since(start))
	s.timeline.add(step, "the object is back", expectStateMarker(t, tc, cm, start))
	g.Eventually(func(g Gomega) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := tc.Get(ctx, client.ObjectKeyFromObject(later), &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the object written after the snapshot: %v", err)
	}, tenantTimeout, 2*time.Second).Should(Succeed())
	expectNodesReady(t, tc, nodes)
	s.timeline.add(step, fmt.Sprintf("all nodes Ready (%d)", nodes), time.Since(start))
	expectTenantStateKept(t, key, tc)
	g.Expect(s.host.Get(ctx, key, nc)).To(Succeed())
	g.Expect(nc.Status.Backup.Restore).NotTo(BeNil())
	g.Expect(nc.Status.Backup.Restore.Phase).To(Equal(knestv1.RestoreSucceeded))
}
