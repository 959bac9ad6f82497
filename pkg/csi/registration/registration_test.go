package registration_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/knest-dev/knest/pkg/csi/registration"
)

// start runs a registration server on a socket in a fresh directory, as kubelet's
// registry, and returns a client of it (as kubelet's plugin watcher dials it) and
// Run's result.
func start(t *testing.T, ctx context.Context) (registerapi.RegistrationClient, string, <-chan error) {
	t.Helper()
	g := NewWithT(t)
	dir, err := os.MkdirTemp("", "reg")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := registration.SocketPath(dir)
	// A stale socket from an earlier run is replaced.
	g.Expect(os.WriteFile(path, nil, 0o600)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- registration.New(registration.Endpoint()).Run(ctx, path) }()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	return registerapi.NewRegistrationClient(conn), path, done
}

// wait is how long the server may take to start or stop on a loaded machine (the
// default second is not enough beside a test bed).
const wait = 10 * time.Second

func TestGetInfoAndSuccess(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(t.Context())
	c, path, done := start(t, ctx)

	var info *registerapi.PluginInfo
	g.Eventually(func() error {
		var err error
		info, err = c.GetInfo(ctx, &registerapi.InfoRequest{})
		return err
	}, wait).Should(Succeed())
	g.Expect(info.GetType()).To(Equal(registerapi.CSIPlugin))
	g.Expect(info.GetName()).To(Equal("csi.knest.dev"))
	g.Expect(info.GetEndpoint()).To(Equal("/var/lib/kubelet/plugins/csi.knest.dev/csi.sock"))
	g.Expect(info.GetSupportedVersions()).To(Equal([]string{"1.0.0"}))

	_, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(done, 200*time.Millisecond).ShouldNot(Receive(), "a successful registration keeps serving")

	cancel()
	g.Eventually(done, wait).Should(Receive(BeNil()))
	g.Expect(path).NotTo(BeAnExistingFile(), "kubelet forgets a plugin whose socket is gone")
}

func TestFailedRegistrationEndsRun(t *testing.T) {
	g := NewWithT(t)
	c, path, done := start(t, t.Context())
	g.Eventually(func() error {
		_, err := c.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{Error: "no NodeGetInfo"})
		return err
	}, wait).Should(Succeed())
	var err error
	g.Eventually(done, wait).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("kubelet failed to register driver csi.knest.dev: no NodeGetInfo")))
	g.Expect(path).NotTo(BeAnExistingFile())
}
