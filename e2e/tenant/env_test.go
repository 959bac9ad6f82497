//go:build e2e

package tenant_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/knest-dev/knest/internal/testenv"
)

// Environment switches.
const (
	// envHostKubeconfig is the host cluster where Cluster API, CAPK, KubeVirt and
	// knest's controller already run: the kind cluster hack/kind/up.sh brings up
	// (make e2e). Required.
	envHostKubeconfig = "KNEST_E2E_HOST_KUBECONFIG"
	// envNodeImage and envKernelImage set the nodes' containerDisk and kernel-boot
	// images (on real KubeVirt the node image has no bootloader, so it needs both).
	envNodeImage   = "KNEST_E2E_NODE_IMAGE"
	envKernelImage = "KNEST_E2E_KERNEL_IMAGE"
	// envConformance is the conformance suite's build (make conformance-images:
	// bin/ginkgo, bin/e2e.test, bin/kubectl, images/*/repo-list.yaml) and
	// envConformanceNodeImage the node image with its images baked in: TestHostedCluster
	// runs the suite's smoke part (conformance_test.go) on a worker booting it.
	envConformance          = "KNEST_E2E_CONFORMANCE"
	envConformanceNodeImage = "KNEST_E2E_CONFORMANCE_NODE_IMAGE"
	// envFull runs every step; unset, the steps CI runs (create, scale, delete).
	envFull = "KNEST_E2E_FULL"
	// envSecondCluster=false leaves the second cluster (step 3) out of a full run, on
	// machines where two tenant control planes do not fit: under emulation an idle
	// control plane takes about 1.3 host cores.
	envSecondCluster = "KNEST_E2E_SECOND_CLUSTER"
	// envStateDir keeps the timeline report, the tenants' kubeconfigs and manifests,
	// and what a tenant's API showed when a step failed.
	envStateDir = "KNEST_E2E_STATE_DIR"
	// envUpgradeFrom and envUpgradeTo are the versions TestUpgrade rolls a cluster
	// between; make e2e-upgrade sets them to the first and last of NODE_KUBE_VERSIONS.
	envUpgradeFrom = "KNEST_E2E_UPGRADE_FROM"
	envUpgradeTo   = "KNEST_E2E_UPGRADE_TO"
	// envControlPlaneMode=hosted runs TestUpgrade with a hosted control plane.
	envControlPlaneMode = "KNEST_E2E_CONTROL_PLANE_MODE"
)

// suite is what every step uses.
type suite struct {
	host       client.Client
	kubeconfig string // host cluster
	knest      string // the CLI binary
	stateDir   string
	timeline   *timeline
}

var s suite

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	kc := os.Getenv(envHostKubeconfig)
	if kc == "" {
		return fail(fmt.Errorf("%s is not set: run make e2e, which brings up the kind host, or source the env file hack/kind/up.sh writes", envHostKubeconfig))
	}
	s.stateDir = os.Getenv(envStateDir)
	if s.stateDir == "" {
		dir, err := os.MkdirTemp("", "knest-e2e-")
		if err != nil {
			return fail(err)
		}
		s.stateDir = dir
	}
	s.timeline = newTimeline()
	// The clients log the API servers' warnings (a deprecated version, say) through
	// controller-runtime's logger; unset, it prints a stack trace instead.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stdout), zap.ConsoleEncoder()))
	defer func() {
		path := filepath.Join(s.stateDir, "timeline.md")
		if err := s.timeline.write(path); err != nil {
			fmt.Fprintf(os.Stderr, "ERROR: timeline: %v\n", err)
		}
		fmt.Printf("\n%s\nTimeline report: %s\n", s.timeline.summary(), path)
	}()

	s.kubeconfig = kc
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return fail(err)
	}
	if s.host, err = client.New(cfg, client.Options{Scheme: testenv.NewScheme()}); err != nil {
		return fail(err)
	}
	if s.knest, err = buildCLI(ctx, s.stateDir); err != nil {
		return fail(err)
	}
	fmt.Printf("State (timeline, tenant kubeconfigs, state on failure): %s\n", s.stateDir)
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
