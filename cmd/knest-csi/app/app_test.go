package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/knest-dev/knest/cmd/knest-csi/app"
	"github.com/knest-dev/knest/internal/freeport"
	"github.com/knest-dev/knest/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// syncBuffer is a log sink the command and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run starts knest-csi with args and returns its logs and its result.
func run(t *testing.T, ctx context.Context, args ...string) (*syncBuffer, <-chan error) {
	t.Helper()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, logs, args) }()
	return logs, done
}

// socketDir is a short directory for unix sockets (their paths are limited to 108
// bytes).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func healthz(address string) (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://%s/healthz", address))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"controller", "--cluster", "demo", "--prep-image", "i"}, "--namespace, --cluster and --prep-image are required"},
		{[]string{"controller", "--namespace", "tenants", "--prep-image", "i"}, "--namespace, --cluster and --prep-image are required"},
		{[]string{"controller", "--namespace", "tenants", "--cluster", "demo"}, "--namespace, --cluster and --prep-image are required"},
		{[]string{"node"}, "--node-id is required"},
		{[]string{"node", "--node-id", "n", "--endpoint", "tcp://127.0.0.1:1"}, "--endpoint must be a unix socket"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		g := NewWithT(t)
		logs := &syncBuffer{}
		err := app.Run(t.Context(), logs, tc.args)
		g.Expect(err).To(MatchError(ContainSubstring(tc.err)), "%v", tc.args)
		g.Expect(logs.String()).To(HavePrefix("ERROR: "), "the error is printed once, at the top")
	}
	// In-cluster is the default; outside a pod it says what to do.
	err := app.Run(t.Context(), &syncBuffer{}, []string{"controller", "--namespace", "tenants", "--cluster", "demo", "--prep-image", "i"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("give --kubeconfig")))
}

func TestNodeServesAndRegistersWithKubelet(t *testing.T) {
	g := NewWithT(t)
	dir := socketDir(t)
	endpoint, registry, health := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "registry"), freeport.Address(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs, done := run(t, ctx, "node", "--node-id", "worker-0", "--endpoint", "unix://"+endpoint,
		"--registration-dir", registry, "--health-address", health)

	// The CSI services: identity and node.
	conn := dial(t, endpoint)
	g.Eventually(func() error {
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		return err
	}, 10*time.Second).Should(Succeed(), func() string { return logs.String() })
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.GetName()).To(Equal("csi.knest.dev"))
	g.Expect(info.GetVendorVersion()).To(MatchRegexp(`^v\d+\.\d+\.\d+$`))
	nodeInfo, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeInfo.GetNodeId()).To(Equal("worker-0"))
	_, err = csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	g.Expect(err).To(HaveOccurred(), "no controller service on a node")

	// Registration, as kubelet's plugin watcher does it: the socket in the registry.
	reg := registerapi.NewRegistrationClient(dial(t, filepath.Join(registry, "csi.knest.dev-reg.sock")))
	var plugin *registerapi.PluginInfo
	g.Eventually(func() error {
		plugin, err = reg.GetInfo(ctx, &registerapi.InfoRequest{})
		return err
	}, 10*time.Second).Should(Succeed())
	g.Expect(plugin.GetEndpoint()).To(Equal("/var/lib/kubelet/plugins/csi.knest.dev/csi.sock"), "the socket as kubelet sees it")
	g.Expect(plugin.GetType()).To(Equal(registerapi.CSIPlugin))
	_, err = reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(func() (int, error) { return healthz(health) }).Should(Equal(http.StatusOK))

	// A failed registration ends the command with an error: the container restarts.
	_, err = reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "driver name taken"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(done, 10*time.Second).Should(Receive(MatchError(ContainSubstring("driver name taken"))))
	g.Expect(logs.String()).To(ContainSubstring("Registration failed"))
	_, err = healthz(health)
	g.Expect(err).To(HaveOccurred(), "/healthz stopped with the rest")
}

func TestNodeStopsCleanly(t *testing.T) {
	g := NewWithT(t)
	dir := socketDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	logs, done := run(t, ctx, "node", "--node-id", "worker-0", "--endpoint", "unix://"+filepath.Join(dir, "csi.sock"),
		"--registration-dir", dir, "--health-address", "")
	sock := filepath.Join(dir, "csi.knest.dev-reg.sock")
	g.Eventually(func() string { return sock }, 10*time.Second).Should(BeAnExistingFile(), func() string { return logs.String() })
	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(filepath.Join(dir, "csi.knest.dev-reg.sock")).NotTo(BeAnExistingFile())
}
