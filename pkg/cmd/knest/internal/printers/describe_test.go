package printers

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func TestVersionNotes(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{
		Spec: knestv1.NestedClusterSpec{Version: "v1.35.4", Workers: []knestv1.WorkerPool{
			{Name: "workers", Replicas: ptr.To[int32](2)},
			{Name: "gpu", Replicas: ptr.To[int32](1), Version: "v1.34.4"},
		}},
		Status: knestv1.NestedClusterStatus{
			Version:      "v1.35.4",
			ControlPlane: knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 1, UpToDate: 1},
			Workers: []knestv1.PoolStatus{
				{Name: "workers", Version: "v1.35.4", ReplicaStatus: knestv1.ReplicaStatus{Desired: 2, Ready: 2, Current: 3, UpToDate: 1}},
				{Name: "gpu", Version: "v1.34.4", ReplicaStatus: knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 1, UpToDate: 1}},
			},
		},
	}
	g.Expect(VersionNotes(nc)).To(Equal([]string{
		"pool workers rolling: 1 of 3 up to date",
		"pool gpu is held at v1.34.4; control plane runs v1.35.4",
	}))
	g.Expect(ListVersion(nc)).To(Equal("v1.35.4, pool gpu v1.34.4"))

	// The control plane still rolls; the default pool has not been given the new
	// version yet.
	nc.Status.Version = "v1.34.4"
	nc.Status.ControlPlane.UpToDate = 0
	nc.Status.Workers[0].Version = "v1.34.4"
	nc.Status.Workers[0].UpToDate = 3
	g.Expect(VersionNotes(nc)).To(Equal([]string{
		"control plane upgrading: runs v1.34.4, rolling to v1.35.4",
		"control plane rolling: 0 of 1 up to date",
		"pool gpu is held at v1.34.4, the control plane's version; it stays there when the cluster is upgraded",
	}))
	g.Expect(ListVersion(nc)).To(Equal("v1.34.4 → v1.35.4"))

	// The default pool was given the new version before the control plane finished.
	nc.Status.Workers[0].Version = "v1.35.4"
	g.Expect(VersionNotes(nc)).To(ContainElement("pool workers is rolled to v1.35.4; control plane runs v1.34.4"))
	g.Expect(ListVersion(nc)).To(Equal("v1.34.4 → v1.35.4, pool workers v1.35.4"))
	nc.Status.Workers[0].Version = "v1.34.4"

	// Nothing differs: no notes.
	nc.Spec.Version, nc.Status.Version = "v1.34.4", "v1.34.4"
	nc.Spec.Workers[1].Version = ""
	nc.Status.ControlPlane.UpToDate = 1
	g.Expect(VersionNotes(nc)).To(BeEmpty())
	g.Expect(ListVersion(nc)).To(Equal("v1.34.4"))

	g.Expect(arrow("v1.34.4", "v1.35.4")).To(Equal("v1.34.4 → v1.35.4"))
	g.Expect(arrow("", "v1.35.4")).To(Equal("v1.35.4"))
	g.Expect(arrow("v1.35.4", "v1.35.4")).To(Equal("v1.35.4"))
	g.Expect(arrow("", "")).To(Equal("<none>"))
}

func TestBackupsLine(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	nc := &knestv1.NestedCluster{Spec: knestv1.NestedClusterSpec{Backup: knestv1.BackupSpec{Interval: &metav1.Duration{Duration: time.Hour}, Keep: 24}}}
	g.Expect(backups(nc, now)).To(Equal("every 1h, keeping 24; no snapshot yet"))
	nc.Status.Backup = knestv1.BackupStatus{
		LastSnapshot: &knestv1.Snapshot{Name: "20261127T091500Z.db", TakenAt: metav1.NewTime(now.Add(-45 * time.Minute))},
		Snapshots:    []string{"20261127T081500Z.db", "20261127T091500Z.db"},
		LastFailure:  "context deadline exceeded",
	}
	g.Expect(backups(nc, now)).To(Equal("every 1h, keeping 24; last 20261127T091500Z.db (45m ago, 2 on the volume); last failure: context deadline exceeded"))
	nc.Spec.Backup.Interval = &metav1.Duration{}
	g.Expect(backups(nc, now)).To(HavePrefix("none scheduled; last"))
	for d, want := range map[time.Duration]string{90 * time.Second: "1m30s", 30 * time.Minute: "30m", 90 * time.Minute: "1h30m", 24 * time.Hour: "24h"} {
		g.Expect(shortDuration(d)).To(Equal(want))
	}
}

func TestAutoscaledPoolColumns(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{
		Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{
			{Name: "workers"},
			{Name: "burst", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 5}},
		}},
	}
	// Nothing reported yet: unset replicas count 1, the autoscaled pool its minimum.
	g.Expect(PoolDesired(nc, nc.Spec.Workers[0])).To(Equal("1"))
	g.Expect(PoolDesired(nc, nc.Spec.Workers[1])).To(Equal("auto 0-5"))
	g.Expect(WorkersReady(nc)).To(Equal("0/1 (burst auto 0-5)"))

	nc.Status.WorkersReady = "3/4"
	nc.Status.Workers = []knestv1.PoolStatus{
		{Name: "workers", ReplicaStatus: knestv1.ReplicaStatus{Desired: 1, Ready: 1}},
		{Name: "burst", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 5}, ReplicaStatus: knestv1.ReplicaStatus{Desired: 3, Ready: 2}},
	}
	g.Expect(PoolDesired(nc, nc.Spec.Workers[1])).To(Equal("3 (auto 0-5)"))
	g.Expect(WorkersReady(nc)).To(Equal("3/4 (burst auto 0-5)"))

	var out strings.Builder
	g.Expect(Describe(&out, nc, time.Now())).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`(?m)^  burst\s+3 \(auto 0-5\)\s+2\s`))
}
