//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/e2e/localenv"
	"github.com/knest-dev/knest/internal/testenv"
)

// Environment switches.
const (
	// envHostKubeconfig selects a host cluster where Cluster API, CAPK, KubeVirt and
	// knest's controller already run (make e2e-kind); unset, the suite brings up the
	// local environment (package localenv) itself.
	envHostKubeconfig = "KNEST_E2E_HOST_KUBECONFIG"
	// envNodeImage and envKernelImage set the nodes' containerDisk and kernel-boot
	// images (on real KubeVirt the node image has no bootloader, so it needs both).
	envNodeImage   = "KNEST_E2E_NODE_IMAGE"
	envKernelImage = "KNEST_E2E_KERNEL_IMAGE"
	// envFull runs every step; unset, the steps CI runs (create, scale, delete).
	envFull = "KNEST_E2E_FULL"
	// envSecondCluster=false leaves the second cluster (step 3) out of a full run, on
	// machines where two tenant control planes do not fit: under emulation an idle
	// control plane takes about 1.3 host cores.
	envSecondCluster = "KNEST_E2E_SECOND_CLUSTER"
	// envStateDir keeps VM consoles, component logs and the timeline report.
	envStateDir = "KNEST_E2E_STATE_DIR"
	// envUpgradeFrom and envUpgradeTo are the versions TestUpgrade rolls a cluster
	// between; make e2e-upgrade sets them to the first and last of NODE_KUBE_VERSIONS.
	envUpgradeFrom = "KNEST_E2E_UPGRADE_FROM"
	envUpgradeTo   = "KNEST_E2E_UPGRADE_TO"
)

// suite is what every step uses.
type suite struct {
	host       client.Client
	kubeconfig string // host cluster
	knest      string // the CLI binary
	local      *localenv.Env
	stateDir   string
	timeline   *timeline
}

var s suite

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	s.stateDir = os.Getenv(envStateDir)
	if s.stateDir == "" {
		dir, err := os.MkdirTemp("", "knest-e2e-")
		if err != nil {
			return fail(err)
		}
		s.stateDir = dir
	}
	s.timeline = newTimeline()
	defer func() {
		path := filepath.Join(s.stateDir, "timeline.md")
		if err := s.timeline.write(path); err != nil {
			fmt.Fprintf(os.Stderr, "ERROR: timeline: %v\n", err)
		}
		fmt.Printf("\n%s\nTimeline report: %s\n", s.timeline.summary(), path)
	}()

	var err error
	if s.knest, err = buildCLI(ctx, s.stateDir); err != nil {
		return fail(err)
	}
	if kc := os.Getenv(envHostKubeconfig); kc != "" {
		s.kubeconfig = kc
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			return fail(err)
		}
		if s.host, err = client.New(cfg, client.Options{Scheme: testenv.NewScheme()}); err != nil {
			return fail(err)
		}
	} else {
		start := time.Now()
		if s.local, err = localenv.Start(ctx, localenv.Options{StateDir: s.stateDir}); err != nil {
			return fail(fmt.Errorf("local environment: %w", err))
		}
		stop := sync.OnceFunc(func() {
			if err := s.local.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "ERROR: stopping the local environment: %v\n", err)
			}
		})
		defer stop()
		// An interrupt would otherwise end the process before the deferred stop and
		// leave the API server, etcd and managers running.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sigs
			fmt.Fprintln(os.Stderr, "interrupted: stopping the local environment")
			stop()
			os.Exit(1)
		}()
		s.timeline.add("environment", "host environment up", time.Since(start))
		s.kubeconfig = filepath.Join(s.stateDir, "host.kubeconfig")
		if err := s.local.Host.WriteKubeconfig(s.kubeconfig); err != nil {
			return fail(err)
		}
		s.host = s.local.Host.Client
	}
	fmt.Printf("State, logs and VM consoles: %s\n", s.stateDir)
	return m.Run()
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
	return 1
}

// buildCLI builds the knest binary the steps drive, as a user would run it.
func buildCLI(ctx context.Context, dir string) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	bin := filepath.Join(dir, "knest")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/knest")
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/knest: %v: %s", err, out)
	}
	return bin, nil
}

// knestCmd runs the CLI against the host cluster and returns its stdout; its
// progress output goes to the test log.
func knestCmd(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"--kubeconfig", s.kubeconfig}, args...)
	t.Logf("$ knest %s", strings.Join(args[2:], " "))
	cmd := exec.CommandContext(ctx, s.knest, args...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = testWriter{t}
	err := cmd.Run()
	return stdout.String(), err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
