package app_test

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knest-dev/knest/pkg/internal/knesttest"
)

// TestUnreachableHost: when the host's API server refuses connections, or accepts them
// and never answers (a frozen or overloaded server, a half-open network), a command
// fails within --request-timeout with an error that names the server and says which.
func TestUnreachableHost(t *testing.T) {
	g := NewWithT(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer silent.Close()
	go func() { // accept, read nothing, answer nothing
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	refusing := closed.Addr().String()
	g.Expect(closed.Close()).To(Succeed())

	for _, tc := range []struct {
		addr, want string
	}{
		{silent.Addr().String(), "did not answer in time"},
		{refusing, "is not reachable"},
	} {
		kc := kubeconfigFor(t, "https://"+tc.addr)
		start := time.Now()
		r := knest(t, "", "list", "--kubeconfig", kc, "--request-timeout", "2s")
		took := time.Since(start)
		g.Expect(r.err).To(HaveOccurred())
		g.Expect(knesttest.Lines(r.stderr)).To(ConsistOf(And(
			HavePrefix("ERROR: the host cluster's API server https://"+tc.addr+" "+tc.want+" ("),
			HaveSuffix("check that it is up and that --kubeconfig and --context point at it (--request-timeout bounds each request)"))))
		g.Expect(took).To(BeNumerically("<", 10*time.Second), "the request timeout bounds the command")
	}
}

// kubeconfigFor is the test bed's kubeconfig pointing at server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
