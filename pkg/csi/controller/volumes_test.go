package controller_test

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/knest-dev/knest/pkg/csi/controller"
)

func TestVolumeSize(t *testing.T) {
	const mi, gi = int64(1) << 20, int64(1) << 30
	for _, c := range []struct {
		name            string
		required, limit int64
		want            int64
		wantErr         bool
	}{
		{name: "none", want: gi},
		{name: "whole MiB", required: 5 * mi, want: 5 * mi},
		{name: "rounds up", required: 5*mi + 1, want: 6 * mi},
		{name: "one byte", required: 1, want: mi},
		{name: "limit only, above the default", limit: 10 * gi, want: gi},
		{name: "limit only, below the default", limit: 10*mi + 5, want: 10 * mi},
		{name: "rounding up passes the limit", required: 5*mi + 1, limit: 5*mi + 2, wantErr: true},
		{name: "limit below a MiB", limit: mi - 1, wantErr: true},
		{name: "limit below required", required: 2 * mi, limit: mi, wantErr: true},
		{name: "negative", required: -1, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := controller.VolumeSize(&csi.CapacityRange{RequiredBytes: c.required, LimitBytes: c.limit})
			if c.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestHostRequest(t *testing.T) {
	g := NewWithT(t)
	const mi, gi = int64(1) << 20, int64(1) << 30
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	g.Expect(controller.HostRequest(gi, fs)).To(Equal(1086 * mi)) // 1085.44 MiB, rounded up
	g.Expect(controller.HostRequest(100*mi, fs)).To(Equal(106 * mi))
	g.Expect(controller.HostRequest(mi, fs)).To(Equal(2 * mi))
	g.Expect(controller.HostRequest(mi+1, fs)).To(Equal(3 * mi))
	g.Expect(controller.HostRequest(gi, block)).To(Equal(gi))
	for _, c := range []int64{mi, gi, 10*gi + 7*mi, 1 << 50} {
		// Room for disk.img and KubeVirt's 5.5% filesystem overhead.
		g.Expect(float64(controller.HostRequest(c, fs))*(1-0.055)).To(BeNumerically(">=", float64(c)), "%d", c)
	}
}

func TestVolumeID(t *testing.T) {
	g := NewWithT(t)
	long := string(make([]byte, 128))
	id := controller.VolumeID("tenant-a", "pvc-1")
	g.Expect(controller.VolumeID("tenant-a", "pvc-1")).To(Equal(id))
	g.Expect(controller.VolumeID("tenant-b", "pvc-1")).NotTo(Equal(id))
	g.Expect(controller.VolumeID("tenant-a", "pvc-2")).NotTo(Equal(id))
	// "a" + "/b-c" and "a/b" + "-c" must not meet.
	g.Expect(controller.VolumeID("a", "b/c")).NotTo(Equal(controller.VolumeID("a/b", "c")))
	for _, id := range []string{id, controller.VolumeID("x", long)} {
		// A PVC name and a KubeVirt volume name.
		g.Expect(validation.IsDNS1123Label(id)).To(BeEmpty())
	}
}
