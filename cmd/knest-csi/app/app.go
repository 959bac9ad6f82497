// Package app is knest-csi's main: the root command and its two subcommands, one per
// half of the driver (controller.go, node.go), and prepare-disk (preparedisk.go),
// which the controller's prep pods run.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

// DefaultEndpoint is the CSI socket in the containers: a volume the sidecars (on
// the host) or kubelet's plugin directory (in the tenant) share.
const DefaultEndpoint = "unix:///csi/csi.sock"

// DefaultHealthAddress serves /healthz, at the port upstream's livenessprobe uses.
const DefaultHealthAddress = ":9808"

// options are the flags every subcommand has.
type options struct {
	endpoint      string
	healthAddress string
	verbosity     int
}

// Main runs knest-csi with the process's arguments and exits 1 on error.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Stderr, os.Args[1:]); err != nil {
		stop()
		os.Exit(1)
	}
}

// Run runs knest-csi with args until ctx is done or it fails; logs (and the error,
// once) go to logs.
func Run(ctx context.Context, logs io.Writer, args []string) error {
	cmd := NewCommand(logs)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(logs, "ERROR: %v\n", err)
		return err
	}
	return nil
}

// NewCommand returns the root command.
func NewCommand(logs io.Writer) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:           "knest-csi",
		Short:         "knest's CSI driver " + knestcsi.DriverName + ": tenant volumes as host PVCs hot-plugged into node VMs",
		Version:       knestcsi.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(logs)
	cmd.SetErr(logs)
	fl := cmd.PersistentFlags()
	fl.StringVar(&o.endpoint, "endpoint", DefaultEndpoint, "CSI endpoint: the unix socket to serve the CSI services on")
	fl.StringVar(&o.healthAddress, "health-address", DefaultHealthAddress, "Address of /healthz, which asks the CSI identity service's Probe over the endpoint; empty disables it")
	fl.IntVarP(&o.verbosity, "verbosity", "v", 0, "Log verbosity (1: debug)")
	cmd.AddCommand(newControllerCommand(logs, o), newNodeCommand(logs, o), newPrepareDiskCommand(logs))
	return cmd
}

// logger is the driver's logger: JSON lines on w, debug at -v 1.
func (o *options) logger(w io.Writer) logr.Logger {
	return zap.New(zap.WriteTo(w), zap.Level(zapcore.Level(-o.verbosity)))
}

// socketPath is the file of a unix endpoint ("unix:///path" or a path).
func socketPath(endpoint string) (string, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" || strings.Contains(path, "://") {
		return "", fmt.Errorf("--endpoint must be a unix socket (unix:///path), not %q", endpoint)
	}
	return path, nil
}

// dialCSI returns a client connection to the CSI socket at path (it connects on use).
func dialCSI(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// probe asks the identity service at conn whether the driver is ready.
func probe(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return err
	}
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return errors.New("the driver reports not ready")
	}
	return nil
}

// waitServing waits until the CSI services answer at conn, or ctx is done.
func waitServing(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		err := probe(ctx, conn)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the CSI services did not come up: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serveHealth serves /healthz on address until ctx is done: 200 when the identity
// service at conn answers Probe with ready, 503 otherwise. A liveness probe on it
// restarts a driver whose gRPC server no longer answers.
func serveHealth(ctx context.Context, address string, conn *grpc.ClientConn, log logr.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := probe(r.Context(), conn); err != nil {
			log.V(1).Info("Health check failed", "error", err.Error())
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("failed to listen on %s for /healthz: %w", address, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve /healthz on %s: %w", address, err)
	}
	return nil
}

// serve serves the CSI services servers on the endpoint, /healthz, and then (once
// the services answer) each of after, until ctx is done or one of them fails: it
// returns the first error, after all have stopped.
func (o *options) serve(ctx context.Context, log logr.Logger, servers []any, after ...func(ctx context.Context) error) error {
	path, err := socketPath(o.endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("failed to create the directory of %s: %w", path, err)
	}
	conn, err := dialCSI(path)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	ctx, cancel := context.WithCancel(ctrl.LoggerInto(ctx, log))
	defer cancel()
	var tasks []func(context.Context) error
	tasks = append(tasks, func(ctx context.Context) error { return knestcsi.Run(ctx, path, servers...) })
	if o.healthAddress != "" {
		tasks = append(tasks, func(ctx context.Context) error { return serveHealth(ctx, o.healthAddress, conn, log) })
	}
	for _, f := range after {
		tasks = append(tasks, func(ctx context.Context) error {
			if err := waitServing(ctx, conn); err != nil {
				return err
			}
			return f(ctx)
		})
	}
	errs := make(chan error, len(tasks))
	for _, t := range tasks {
		go func() { errs <- t(ctx) }()
	}
	log.Info("Serving CSI", "driver", knestcsi.DriverName, "version", knestcsi.Version, "endpoint", path, "health", o.healthAddress)
	var first error
	for range tasks {
		// Whichever ends first, for whatever reason, ends the others.
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
		cancel()
	}
	return first
}
