// Package registration is kubelet's plugin registration service for knest's CSI node
// plugin (kubelet's pluginregistration v1 API), which upstream's node-driver-registrar
// serves for other drivers: kubelet finds the socket in its plugins_registry
// directory, asks GetInfo for the driver's name and CSI endpoint, registers the
// driver (calling its NodeGetInfo) and reports the outcome with
// NotifyRegistrationStatus.
package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	knestcsi "github.com/knest-dev/knest/pkg/csi"
)

const (
	// KubeletPluginDir is where kubelet's CSI plugins keep their sockets, as kubelet
	// sees them: the node plugin's endpoint is KubeletPluginDir/<driver>/csi.sock.
	KubeletPluginDir = "/var/lib/kubelet/plugins"
	// RegistryDir is the directory kubelet watches for registration sockets.
	RegistryDir = "/var/lib/kubelet/plugins_registry"
)

// SupportedVersions are the CSI versions the driver speaks, as kubelet wants them.
var SupportedVersions = []string{"1.0.0"}

// Endpoint is the node plugin's CSI socket as kubelet sees it.
func Endpoint() string { return KubeletPluginDir + "/" + knestcsi.DriverName + "/csi.sock" }

// SocketPath is the registration socket in kubelet's registry directory dir.
func SocketPath(dir string) string { return dir + "/" + knestcsi.DriverName + "-reg.sock" }

// Server is the registration service of the CSI driver.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
	failed   chan error
}

var _ registerapi.RegistrationServer = &Server{}

// New returns a registration service that tells kubelet the CSI endpoint (a path
// on the node, Endpoint()).
func New(endpoint string) *Server {
	return &Server{endpoint: endpoint, failed: make(chan error, 1)}
}

func (s *Server) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	ctrl.LoggerFrom(ctx).V(1).Info("Kubelet asked for the plugin's info")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              knestcsi.DriverName,
		Endpoint:          s.endpoint,
		SupportedVersions: SupportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs kubelet's outcome; a failure ends Run with an error,
// so that the container exits and is restarted, as node-driver-registrar does.
func (s *Server) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	log := ctrl.LoggerFrom(ctx)
	if st.GetPluginRegistered() {
		log.Info("Registered with kubelet", "driver", knestcsi.DriverName, "endpoint", s.endpoint)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	err := fmt.Errorf("kubelet failed to register driver %s: %s", knestcsi.DriverName, st.GetError())
	log.Error(err, "Registration failed")
	select {
	case s.failed <- err:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Run serves the registration service on the unix socket path until ctx is done
// (nil) or kubelet reports a failed registration (that error). A stale socket file is
// removed first; the socket is removed when Run returns, so that kubelet forgets
// the plugin. The calls log with ctx's logger.
func (s *Server) Run(ctx context.Context, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	defer func() { _ = os.Remove(path) }()
	g := grpc.NewServer(grpc.UnaryInterceptor(knestcsi.WithLogger(ctrl.LoggerFrom(ctx))))
	registerapi.RegisterRegistrationServer(g, s)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	select {
	case <-ctx.Done():
		g.GracefulStop()
		return <-served
	case err := <-s.failed:
		g.GracefulStop()
		<-served
		return err
	case err := <-served:
		return fmt.Errorf("failed to serve plugin registration on %s: %w", path, err)
	}
}
