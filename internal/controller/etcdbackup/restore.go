package etcdbackup

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/backup"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// +kubebuilder:rbac:groups=controlplane.knest.dev,resources=hostedcontrolplanes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=kubeadmconfigs,verbs=get;list;watch

// Annotations of a control-plane VM being restored: the snapshot, and the peer
// URL its member is restored with (its address when it was stopped).
const (
	vmRestoreAnnotation = "knest.dev/etcd-restore"
	vmPeerAnnotation    = "knest.dev/etcd-restore-peer-url"
)

// poll is how often a restore looks at what it does not watch (a pod going, a VM
// stopping).
const poll = 3 * time.Second

func restoring(nc *knestv1.NestedCluster) bool {
	_, ok := nc.Annotations[knestv1.RestoreFromAnnotation]
	return ok
}

// reconcileRestore takes the restore the annotation asks for one step further:
// stop etcd (the hosted StatefulSet to zero, the VM halted), run the restore Job
// on its volume, start etcd again. Each step is read back from the objects, so a
// restart of the controller resumes where it was.
func (r *Reconciler) reconcileRestore(ctx context.Context, nc *knestv1.NestedCluster, in backup.Input) (ctrl.Result, error) {
	snap := nc.Annotations[knestv1.RestoreFromAnnotation]
	st := &nc.Status.Backup
	// Act on the object as it is: the cache may be behind this controller's own write
	// that ended the restore (the annotation removed, the Jobs deleted), and a restore
	// resumed from it would stop etcd again and run it anew.
	live := &knestv1.NestedCluster{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(nc), live); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if live.ResourceVersion != nc.ResourceVersion {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if st.Restore == nil || st.Restore.Snapshot != snap || st.Restore.Phase != knestv1.RestoreRunning {
		// Nothing of an earlier restore's Job may count for this one.
		if gone, err := r.deleteRestoreJobs(ctx, nc); err != nil || !gone {
			return ctrl.Result{RequeueAfter: poll}, err
		}
		st.Restore = &knestv1.RestoreStatus{Snapshot: snap, Phase: knestv1.RestoreRunning, StartedAt: ptr.To(metav1.NewTime(r.now()))}
	}
	if msg := backup.Refusal(nc, snap); msg != "" {
		return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed, msg)
	}
	if nc.Spec.ControlPlane.IsHosted() {
		return r.restoreHosted(ctx, nc, in, snap)
	}
	return r.restoreVM(ctx, nc, in, snap)
}

func (r *Reconciler) restoreHosted(ctx context.Context, nc *knestv1.NestedCluster, in backup.Input, snap string) (ctrl.Result, error) {
	hcp := &hcpv1.HostedControlPlane{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: cluster.ControlPlaneName(nc.Name)}, hcp); err != nil {
		return ctrl.Result{}, err
	}
	n := hosted.EtcdMembers(hcp)
	if jobs, ended, err := r.endedRestoreJobs(ctx, nc, n); err != nil || ended {
		if err != nil {
			return ctrl.Result{}, err
		}
		// etcd starts again on what the Jobs wrote (or, if one failed, on data that
		// may mix old and restored members: verify says so, and a new restore helps).
		if _, stopped := hcp.Annotations[hcpv1.EtcdStoppedAnnotation]; stopped {
			p := client.MergeFrom(hcp.DeepCopy())
			delete(hcp.Annotations, hcpv1.EtcdStoppedAnnotation)
			if err := r.Client.Patch(ctx, hcp, p); err != nil {
				return ctrl.Result{}, err
			}
		}
		notReady, err := r.apiServerNotReady(ctx, nc)
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.verify(ctx, nc, jobs, notReady)
	}
	if _, stopped := hcp.Annotations[hcpv1.EtcdStoppedAnnotation]; !stopped {
		p := client.MergeFrom(hcp.DeepCopy())
		metav1.SetMetaDataAnnotation(&hcp.ObjectMeta, hcpv1.EtcdStoppedAnnotation, snap)
		if err := r.Client.Patch(ctx, hcp, p); err != nil {
			return ctrl.Result{}, err
		}
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(nc.Namespace), client.MatchingLabels(hosted.EtcdSelector(nc.Name))); err != nil {
		return ctrl.Result{}, err
	}
	if len(pods.Items) > 0 {
		nc.Status.Backup.Restore.Message = fmt.Sprintf("Waiting for etcd's pods to stop (%d left)", len(pods.Items))
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	// Every member from the same snapshot, each by its own Job on its own claim
	// (claims of node-local classes may be on different nodes).
	members := make([]backup.Member, n)
	for i := range n {
		members[i] = hosted.EtcdMember(nc.Name, nc.Namespace, i)
	}
	initial := ""
	if n > 1 {
		initial = backup.InitialCluster(members...)
	}
	for i, m := range members {
		target := backup.RestoreTarget{Claim: hosted.EtcdClaimName(nc.Name, i), Member: m, Index: i, InitialCluster: initial}
		if err := r.createRestoreJob(ctx, nc, in.RestoreJob(snap, target)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if n > 1 {
		nc.Status.Backup.Restore.Message = fmt.Sprintf("Restoring %d etcd members, a Job each", n)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) restoreVM(ctx context.Context, nc *knestv1.NestedCluster, in backup.Input, snap string) (ctrl.Result, error) {
	vms := &kubevirtv1.VirtualMachineList{}
	if err := r.Client.List(ctx, vms, client.InNamespace(nc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: nc.Name, "cluster.x-k8s.io/role": "control-plane"}); err != nil {
		return ctrl.Result{}, err
	}
	if len(vms.Items) != 1 {
		return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed,
			fmt.Sprintf("a VM control plane is restored with one VM, and %d exist: wait for the control plane's rollout to end", len(vms.Items)))
	}
	vm := &vms.Items[0]
	if jobs, ended, err := r.endedRestoreJobs(ctx, nc, 1); err != nil || ended {
		if err != nil {
			return ctrl.Result{}, err
		}
		// The VM boots; its knest-etcd-disk script puts the restored data on a new
		// file system and kubeadm init renders the control plane around it (or, if
		// the Job failed, around the old data).
		if _, halted := vm.Annotations[vmRestoreAnnotation]; halted {
			delete(vm.Annotations, vmRestoreAnnotation)
			delete(vm.Annotations, vmPeerAnnotation)
			vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
			if err := r.Client.Update(ctx, vm); err != nil {
				if apierrors.IsConflict(err) {
					return ctrl.Result{RequeueAfter: time.Second}, nil
				}
				return ctrl.Result{}, err
			}
		}
		// The VM booted again: no connection from before reaches it.
		return r.verify(ctx, nc, jobs, "")
	}
	if !vmtemplate.HasEtcdDisk(vm) {
		return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed,
			fmt.Sprintf("VM %s keeps etcd on its root disk (made before etcd had a disk of its own): there is no volume to restore into", vm.Name))
	}
	if vm.Annotations[vmRestoreAnnotation] != snap {
		if joined, err := r.joined(ctx, nc, vm.Name); err != nil || joined {
			if err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed, fmt.Sprintf("the control-plane machine of VM %s joined the cluster "+
				"(it replaced the first one in a rollout), and knest restores only a first control plane, which kubeadm initialized", vm.Name))
		}
		peer := "https://127.0.0.1:2380"
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err == nil && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != "" {
			peer = "https://" + vmi.Status.Interfaces[0].IP + ":2380"
		}
		metav1.SetMetaDataAnnotation(&vm.ObjectMeta, vmRestoreAnnotation, snap)
		metav1.SetMetaDataAnnotation(&vm.ObjectMeta, vmPeerAnnotation, peer)
		vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
		vm.Spec.Running = nil
		if err := r.Client.Update(ctx, vm); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
			return ctrl.Result{}, err
		}
		nc.Status.Backup.Restore.Message = fmt.Sprintf("Stopping VM %s", vm.Name)
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	// The disk is written only once qemu is gone with its pod.
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(nc.Namespace), client.MatchingLabels{"vm.kubevirt.io/name": vm.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if len(pods.Items) > 0 {
		nc.Status.Backup.Restore.Message = fmt.Sprintf("Waiting for VM %s to stop", vm.Name)
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	target := backup.RestoreTarget{Claim: vmtemplate.EtcdDiskClaimName(vm.Name), VM: true,
		Member: backup.Member{Name: vm.Name, PeerURL: vm.Annotations[vmPeerAnnotation]}}
	return ctrl.Result{}, r.createRestoreJob(ctx, nc, in.RestoreJob(snap, target))
}

// joined tells whether the VM's machine joined the cluster rather than
// initializing it (its KubeadmConfig, as KubeadmControlPlane made it).
func (r *Reconciler) joined(ctx context.Context, nc *knestv1.NestedCluster, vm string) (bool, error) {
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(nc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: nc.Name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return false, err
	}
	for _, m := range machines.Items {
		if m.Spec.InfrastructureRef.Name != vm {
			continue
		}
		cfg := &bootstrapv1.KubeadmConfig{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg); err != nil {
			return false, err
		}
		return cfg.Spec.JoinConfiguration.IsDefined(), nil
	}
	return false, fmt.Errorf("no control-plane Machine of cluster %s has VM %s", nc.Name, vm)
}

// createRestoreJob creates the restore Job, once; its end brings the cluster back.
func (r *Reconciler) createRestoreJob(ctx context.Context, nc *knestv1.NestedCluster, job *batchv1.Job) error {
	current := &batchv1.Job{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), current); {
	case apierrors.IsNotFound(err):
		if err := r.apply(ctx, nc, job); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	nc.Status.Backup.Restore.Message = fmt.Sprintf("Restoring with Job %s", job.Name)
	return nil
}

// endedRestoreJobs are the restore's Jobs once all n have succeeded or failed.
func (r *Reconciler) endedRestoreJobs(ctx context.Context, nc *knestv1.NestedCluster, n int) ([]batchv1.Job, bool, error) {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(nc.Namespace), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentRestore))); err != nil {
		return nil, false, err
	}
	if len(jobs.Items) < n {
		return nil, false, nil
	}
	for i := range jobs.Items {
		if jobCondition(&jobs.Items[i], batchv1.JobComplete) == nil && jobCondition(&jobs.Items[i], batchv1.JobFailed) == nil {
			return nil, false, nil
		}
	}
	return jobs.Items, true, nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// verifyTimeout bounds the wait for the tenant's API once etcd runs again: a VM
// control plane boots, under emulation, in a few minutes.
const verifyTimeout = 30 * time.Minute

// apiServerNotReady says why new clients cannot reach a hosted API server yet, or
// "". One that lost etcd for the restore failed its readiness probe and is out of
// its Service until the next probe passes, while the connection knest kept from
// before still reaches it: its answer alone would call the restore done while
// `kubectl` is refused.
func (r *Reconciler) apiServerNotReady(ctx context.Context, nc *knestv1.NestedCluster) (string, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(nc.Namespace), client.MatchingLabels(hosted.APIServerSelector(nc.Name))); err != nil {
		return "", err
	}
	for i := range pods.Items {
		if hosted.PodReady(&pods.Items[i]) {
			return "", nil
		}
	}
	return "no API server pod is ready yet", nil
}

// verify ends the restore once etcd runs again: failed with the Job's last words
// when it failed; succeeded when the tenant's API answers as the cluster knest
// knows (status.tenantID) and nothing else keeps new clients out (notReady, empty
// when nothing does), so that a restore is not called done while its control
// plane still boots.
func (r *Reconciler) verify(ctx context.Context, nc *knestv1.NestedCluster, jobs []batchv1.Job, notReady string) (ctrl.Result, error) {
	var ended time.Time
	for i := range jobs {
		if failed := jobCondition(&jobs[i], batchv1.JobFailed); failed != nil {
			what := "etcd started again on its old data: "
			if len(jobs) > 1 {
				what = fmt.Sprintf("Job %s failed, and etcd started again on what its Jobs left: restore again: ", jobs[i].Name)
			}
			return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed, what+r.restoreFailure(ctx, nc, failed.Message))
		}
		if c := jobCondition(&jobs[i], batchv1.JobComplete); c != nil && c.LastTransitionTime.After(ended) {
			ended = c.LastTransitionTime.Time
		}
	}
	id, err := r.Tenants.TenantID(ctx, nc)
	same := err == nil && (nc.Status.TenantID == "" || id == nc.Status.TenantID)
	if same && notReady == "" {
		return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreSucceeded, "")
	}
	why := fmt.Sprintf("it answers as another cluster (kube-system %s, not %s)", id, nc.Status.TenantID)
	switch {
	case err != nil:
		why = err.Error()
	case same:
		why = notReady
	}
	if r.now().Sub(ended) > verifyTimeout {
		return ctrl.Result{}, r.finish(ctx, nc, knestv1.RestoreFailed,
			fmt.Sprintf("etcd runs on the restored data, but the tenant's API did not answer as the same cluster within %s: %s", verifyTimeout, why))
	}
	nc.Status.Backup.Restore.Message = "etcd runs on the restored data; waiting for the tenant's API: " + why
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

// restoreFailure is the restore pods' last words, or the Job's.
func (r *Reconciler) restoreFailure(ctx context.Context, nc *knestv1.NestedCluster, jobMessage string) string {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(nc.Namespace), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentRestore))); err == nil {
		for i := range pods.Items {
			if t := terminated(&pods.Items[i], "restore"); t != nil && t.ExitCode != 0 {
				return failureMessage(t)
			}
		}
	}
	if jobMessage == "" {
		return "the restore Job failed"
	}
	return jobMessage
}

// finish records the restore's end, removes its Job and the annotation that
// asked for it.
func (r *Reconciler) finish(ctx context.Context, nc *knestv1.NestedCluster, phase knestv1.RestorePhase, msg string) error {
	if _, err := r.deleteRestoreJobs(ctx, nc); err != nil {
		return err
	}
	st := nc.Status.Backup.Restore
	st.Phase, st.Message, st.FinishedAt = phase, truncate(msg, 1024), ptr.To(metav1.NewTime(r.now()))
	delete(nc.Annotations, knestv1.RestoreFromAnnotation)
	return nil
}

// deleteRestoreJobs deletes the cluster's restore Jobs, with their pods; true
// once they are gone.
func (r *Reconciler) deleteRestoreJobs(ctx context.Context, nc *knestv1.NestedCluster) (bool, error) {
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(nc.Namespace), client.MatchingLabels(backup.Selector(nc.Name, backup.ComponentRestore))); err != nil {
		return false, err
	}
	for i := range jobs.Items {
		if job := &jobs.Items[i]; job.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
	}
	return len(jobs.Items) == 0, nil
}
