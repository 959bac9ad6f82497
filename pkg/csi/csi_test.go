package csi_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

func TestSerialFor(t *testing.T) {
	g := NewWithT(t)
	s := knestcsi.SerialFor("csi-0123456789abcdef0123")
	// virtio-blk keeps 20 bytes of a serial; /dev/disk/by-id names want no escaping.
	g.Expect(s).To(MatchRegexp(`^[0-9a-f]{20}$`))
	g.Expect(knestcsi.SerialFor("csi-0123456789abcdef0123")).To(Equal(s))
	g.Expect(knestcsi.SerialFor("csi-0123456789abcdef0124")).NotTo(Equal(s))
	g.Expect(regexp.MustCompile(`^[0-9a-f]{20}$`).MatchString(knestcsi.SerialFor(""))).To(BeTrue())
}

func TestRun(t *testing.T) {
	g := NewWithT(t)
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- knestcsi.Run(ctx, "unix://"+sock, &knestcsi.Identity{Version: "v1.2.3"}) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.GetName()).To(Equal(knestcsi.DriverName))
	g.Expect(info.GetVendorVersion()).To(Equal("v1.2.3"))

	cancel()
	g.Expect(<-done).To(Succeed())

	g.Expect(knestcsi.Run(context.Background(), sock, "not a server")).To(MatchError(ContainSubstring("no CSI identity, controller or node server")))
}
