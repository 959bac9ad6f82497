package knest_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/knest-dev/knest/pkg/cmd/knest/app"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

// TestFlagsCheckedBeforeTheCluster runs commands with bad flags and no kubeconfig: each
// must fail on its input, never get as far as looking for the host cluster.
func TestFlagsCheckedBeforeTheCluster(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing"))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"scale", "demo"}, "nothing to scale: set --control-plane, --workers, --pool NAME=COUNT or --autoscale POOL=MIN:MAX"},
		{[]string{"scale"}, "accepts 1 arg(s), received 0"},
		{[]string{"scale", "demo", "--control-plane", "4"}, "the control plane cannot have 4 nodes: it needs 1, 3, 5 or 7, because an even number of etcd members tolerates no more failures than 3"},
		{[]string{"scale", "demo", "--control-plane", "0"}, "the control plane cannot be scaled to 0 nodes"},
		{[]string{"scale", "demo", "--workers", "201"}, "the default pool cannot have 201 nodes: a pool has from 0 to 200"},
		{[]string{"scale", "demo", "--pool", "gpu=-1"}, `pool "gpu=-1": a pool has from 0 to 200 nodes`},
		{[]string{"scale", "demo", "--workers", "1", "--remove-node", "a", "--remove-node", "a"}, "node a is named twice"},
		{[]string{"scale", "demo", "--remove-node", "a"}, "--remove-node needs the size its pool shrinks to"},
		{[]string{"scale", "demo", "--workers", "1", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"upgrade", "demo"}, "--version is required"},
		{[]string{"upgrade"}, "accepts 1 arg(s), received 0"},
		{[]string{"upgrade", "demo", "--version", "1.37.0"}, "--version 1.37.0: version must look like v1.MINOR.PATCH with a minor from 30 to 36"},
		{[]string{"upgrade", "demo", "--version", "v1.35.4", "--hold-pool", "gpu", "--release-pool", "gpu"}, "pool gpu cannot be both held and released"},
		{[]string{"upgrade", "demo", "--version", "v1.35.4", "--hold-pool", "Gpu"}, `pool "Gpu": pool name must be a DNS label`},
		{[]string{"upgrade", "demo", "--version", "v1.35.4", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"delete"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"delete", "demo", "--timeout", "-5m"}, "--timeout must be positive (got -5m0s)"},
		{[]string{"list", "-o", "table"}, `unsupported output format "table": use one of yaml, json, name`},
		{[]string{"list", "extra"}, `unknown command "extra" for "knest list"`},
		{[]string{"get"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"get", "demo", "-o", "name"}, `unsupported output format "name": use one of yaml, json`},
		{[]string{"kubeconfig"}, "accepts 1 arg(s), received 0"},
		{[]string{"kubeconfig", "demo", "--server", "ftp://x"}, `--server: server "ftp://x" must be a URL like https://HOST:PORT`},
		{[]string{"version", "extra"}, `unknown command "extra" for "knest version"`},
		{[]string{"-v", "x", "version"}, `invalid argument "x" for "-v, --verbosity"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var out, errOut bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
			err := app.RunContext(context.Background(), cli.NewLogger(&errOut, 0).Logr(), streams, tt.args)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(errOut.String()).To(HavePrefix("ERROR: "))
			g.Expect(errOut.String()).NotTo(ContainSubstring("kubeconfig for the host cluster"))
		})
	}
}

func TestNoKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	for _, args := range [][]string{{"list"}, {"get", "demo"}, {"delete", "demo"}, {"scale", "demo", "--workers", "2"}, {"upgrade", "demo", "--version", "1.35.4"}, {"kubeconfig", "demo"}} {
		g := NewWithT(t)
		var out, errOut bytes.Buffer
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
		err := app.RunContext(context.Background(), cli.NewLogger(&errOut, 0).Logr(), streams, args)
		g.Expect(err).To(MatchError("no kubeconfig for the host cluster: set --kubeconfig or KUBECONFIG, or create ~/.kube/config"), "args %v", args)
	}
}
