// Package kubeconfig is `knest kubeconfig`: it prints or writes a cluster's admin
// kubeconfig.
package kubeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cmd/knest/internal/cmdutil"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/knest"
)

type flagpole struct {
	OutputFile string
	Server     string
}

// NewCommand returns the kubeconfig command.
func NewCommand(logger logr.Logger, streams genericiooptions.IOStreams) *cobra.Command {
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use:   "kubeconfig NAME",
		Short: "Print or write a cluster's admin kubeconfig",
		Long: "Print a cluster's admin kubeconfig (from the Secret Cluster API writes), or write it\n" +
			"with --output-file (mode 0600). --server points it at another URL, for when you reach\n" +
			"the tenant API another way (a port-forward, a proxy); TLS still checks the certificate\n" +
			"against the original endpoint name.",
		Example: `  knest kubeconfig demo > demo.kubeconfig
  knest kubeconfig demo --output-file ~/.kube/demo
  kubectl -n default port-forward svc/demo-lb 6443 &
  knest kubeconfig demo --server https://127.0.0.1:6443 --output-file demo.kubeconfig`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteClusterNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runE(cmd, logger, streams, flags, args[0])
		},
	}
	cmd.Flags().StringVar(&flags.OutputFile, "output-file", "", "write the kubeconfig to this file (mode 0600) instead of stdout")
	cmd.Flags().StringVar(&flags.Server, "server", "", "use this API server URL instead of the cluster's endpoint, e.g. https://127.0.0.1:6443")
	return cmd
}

func runE(cmd *cobra.Command, logger logr.Logger, streams genericiooptions.IOStreams, flags *flagpole, name string) error {
	var opts []knest.KubeconfigOption
	if flags.Server != "" {
		// Check the URL before contacting the cluster.
		if _, err := knest.RewriteServer(placeholder, flags.Server); err != nil {
			return fmt.Errorf("--server: %w", err)
		}
		opts = append(opts, knest.KubeconfigWithServer(flags.Server))
	}
	if flags.OutputFile != "" {
		// Check the path before contacting the cluster.
		if err := CheckOutputFile(flags.OutputFile); err != nil {
			return fmt.Errorf("--output-file: %w", err)
		}
	}
	ns, _, err := cmdutil.Namespace(cmd)
	if err != nil {
		return err
	}
	c, err := cmdutil.NewClient(cmd, logger)
	if err != nil {
		return err
	}
	data, err := c.Kubeconfig(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, opts...)
	if err != nil {
		return err
	}
	if flags.OutputFile == "" {
		_, err := streams.Out.Write(data)
		return err
	}
	if err := WriteFile(flags.OutputFile, data); err != nil {
		return err
	}
	cli.StatusForLogger(logger).Success(fmt.Sprintf("kubeconfig of cluster %s written to %s", name, flags.OutputFile))
	return nil
}

// placeholder is a minimal kubeconfig to check a --server URL against.
var placeholder = []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://example.invalid:6443\n")

// CheckOutputFile says what is wrong with path as a file to write: it names a
// directory, its directory does not exist or is not a directory, or it cannot be
// written there. WriteFile writes a temporary file beside path and renames it, so
// the directory must be writable.
func CheckOutputFile(path string) error {
	if path == "" {
		return errors.New("the path is empty; name a file, e.g. demo.kubeconfig")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; name a file in it, e.g. %s", path, filepath.Join(path, "kubeconfig"))
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s of %s does not exist; create it first (mkdir -p %s)", dir, path, dir)
	case err != nil:
		return fmt.Errorf("cannot use the directory %s of %s: %w", dir, path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory, so %s cannot be created in it", dir, path)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".check-*")
	if err != nil {
		return fmt.Errorf("cannot create files in the directory %s (%v); pick a path you can write", dir, unwrapPath(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops the path from an *fs.PathError, for messages that name it already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// WriteFile writes data to path with mode 0600, replacing the file atomically (an
// existing file with looser permissions does not keep them).
func WriteFile(path string, data []byte) error {
	if err := CheckOutputFile(path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("failed to write the kubeconfig to %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("failed to write the kubeconfig to %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("failed to write the kubeconfig to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to write the kubeconfig to %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig to %s: %w", path, err)
	}
	return nil
}
