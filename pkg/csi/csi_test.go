package csi_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	ctrl "sigs.k8s.io/controller-runtime"

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

// The logger of Run's context is each call's, with the method: a driver's logs name
// what they are about without a global logger.
func TestRunLogsWithItsLogger(t *testing.T) {
	g := NewWithT(t)
	sock := filepath.Join(t.TempDir(), "csi.sock")
	var logs []string
	log := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), log))
	done := make(chan error, 1)
	id := &knestcsi.Identity{Ready: func(ctx context.Context) error {
		ctrl.LoggerFrom(ctx).Info("Probed")
		return nil
	}}
	go func() { done <- knestcsi.Run(ctx, "unix://"+sock, id) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
	g.Expect(err).NotTo(HaveOccurred())
	cancel()
	g.Expect(<-done).To(Succeed())
	g.Expect(logs).To(ConsistOf(And(ContainSubstring(`"msg"="Probed"`), ContainSubstring(`"method"="/csi.v1.Identity/Probe"`))))
}
