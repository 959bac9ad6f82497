package backup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/podsec"
)

func TestSchedule(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		interval *metav1.Duration
		want     string
		suspend  bool
	}{
		{nil, "@every 1h0m0s", false},
		{&metav1.Duration{Duration: 30 * time.Minute}, "@every 30m0s", false},
		{&metav1.Duration{Duration: 24 * time.Hour}, "@every 24h0m0s", false},
		// No schedule: a valid one, suspended, so that `knest backup` has a template.
		{&metav1.Duration{}, "@every 1h0m0s", true},
	} {
		got, suspend := Schedule(knestv1.BackupSpec{Interval: tc.interval})
		g.Expect(got).To(Equal(tc.want))
		g.Expect(suspend).To(Equal(tc.suspend))
	}
}

func TestRestoreJobWritesTheMembersVolume(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
	in := Input{NC: nc, Image: "knest:test"}

	hosted := in.RestoreJob("20261127T091500Z.db", RestoreTarget{Claim: "data-demo-etcd-0", Member: Member{Name: "demo-etcd-0", PeerURL: "https://demo-etcd-0.demo-etcd.tenants.svc:2380"}})
	c := hosted.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(Equal([]string{"etcd", "restore", "--snapshot=/backups/20261127T091500Z.db", "--name=demo-etcd-0",
		"--peer-url=https://demo-etcd-0.demo-etcd.tenants.svc:2380", "--data-dir=/var/lib/etcd", "--owner=65532"}))
	g.Expect(claims(hosted.Spec.Template.Spec.Volumes)).To(Equal(map[string]string{"backups": "demo-etcd-backups", "data": "data-demo-etcd-0"}))
	g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/backups")))
	g.Expect(*hosted.Spec.BackoffLimit).To(BeEquivalentTo(2))

	vm := in.RestoreJob("20261127T091500Z.db", RestoreTarget{Claim: "demo-cp-x-etcd", VM: true, Member: Member{Name: "demo-cp-x", PeerURL: "https://10.244.0.9:2380"}})
	c = vm.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--data-dir=/tmp/etcd", "--disk-image=/disk/disk.img", "--name=demo-cp-x"))
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--owner")), "a VM's disk image keeps its owner")
	g.Expect(claims(vm.Spec.Template.Spec.Volumes)).To(Equal(map[string]string{"backups": "demo-etcd-backups", "disk": "demo-cp-x-etcd"}))
	g.Expect(vm.Labels).To(Equal(Selector("demo", ComponentRestore)))
}

func TestJobFromCronJobIsTheTemplateOwnedByTheCronJob(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}, Spec: knestv1.NestedClusterSpec{Backup: knestv1.BackupSpec{Keep: 5}}}
	cj := Input{NC: nc, Image: "knest:test"}.CronJob()
	cj.UID = "cj-uid"
	j := JobFromCronJob(cj, time.Unix(1800000000, 0))
	g.Expect(j.Name).To(Equal("demo-etcd-backup-manual-1800000000"))
	g.Expect(j.Labels).To(Equal(Selector("demo", ComponentBackup)), "the controller finds its pods as a scheduled one's")
	g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--keep=5"))
	g.Expect(j.OwnerReferences).To(ConsistOf(HaveField("UID", BeEquivalentTo("cj-uid"))))
}

func claims(volumes []corev1.Volume) map[string]string {
	out := map[string]string{}
	for _, v := range volumes {
		if v.PersistentVolumeClaim != nil {
			out[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	return out
}

// Backups run restricted as the non-root user; a restore runs as root, to write
// etcd's data, with only the capabilities that takes.
func TestBackupPodsRunRestricted(t *testing.T) {
	g := NewWithT(t)
	in := Input{NC: &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}, Image: "knest:test"}
	pod := in.CronJob().Spec.JobTemplate.Spec.Template.Spec
	g.Expect(pod.SecurityContext).To(Equal(podsec.Pod(podsec.NonRootUID)))
	g.Expect(pod.Containers[0].SecurityContext).To(Equal(podsec.Container()))

	pod = in.RestoreJob("20261127T091500Z.db", RestoreTarget{Claim: "data-demo-etcd-0", Member: Member{Name: "demo-etcd-0"}}).Spec.Template.Spec
	g.Expect(*pod.SecurityContext.RunAsUser).To(BeZero())
	sc := pod.Containers[0].SecurityContext
	g.Expect(sc.Capabilities.Add).To(Equal([]corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"}))
	g.Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
}
