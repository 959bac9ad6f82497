package controller_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/knest-dev/knest/pkg/csi/controller"
)

// TestHostVMs checks the requests the real VMs sends to virt-api's subresources.
func TestHostVMs(t *testing.T) {
	g := NewWithT(t)
	type request struct {
		method, path string
		body         map[string]any
	}
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := request{method: r.Method, path: r.URL.Path}
		if err := json.Unmarshal(b, &req.body); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		got = append(got, req)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	vms, err := controller.NewVMs(&rest.Config{Host: srv.URL}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	g.Expect(vms.AddVolume(ctx, "ns", "node-1", &kubevirtv1.AddVolumeOptions{
		Name: "csi-1",
		Disk: &kubevirtv1.Disk{Name: "csi-1", Serial: "abc", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			Hotpluggable: true,
		}},
	})).To(Succeed())
	g.Expect(vms.RemoveVolume(ctx, "ns", "node-1", &kubevirtv1.RemoveVolumeOptions{Name: "csi-1"})).To(Succeed())

	const base = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/node-1/"
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].method).To(Equal(http.MethodPut))
	g.Expect(got[0].path).To(Equal(base + "addvolume"))
	g.Expect(got[0].body).To(HaveKeyWithValue("name", "csi-1"))
	g.Expect(got[0].body).To(HaveKeyWithValue("disk", HaveKeyWithValue("serial", "abc")))
	g.Expect(got[0].body).To(HaveKeyWithValue("volumeSource", HaveKeyWithValue("persistentVolumeClaim", HaveKeyWithValue("hotpluggable", true))))
	g.Expect(got[1]).To(Equal(request{method: http.MethodPut, path: base + "removevolume", body: map[string]any{"name": "csi-1"}}))
}
