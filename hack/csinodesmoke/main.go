// Command csinodesmoke drives a running knest-csi node plugin through a volume's life
// on a real disk, as kubelet would: stage (format and mount), publish (bind-mount),
// a file written and read through the pod's path, optionally expand (the disk grown
// first by the caller), unpublish, unstage; after each step it checks the node's
// mount table. hack/csi-node-smoke.sh runs the plugin as its DaemonSet does and
// calls this.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	socket := flag.String("socket", "", "the plugin's CSI socket, as this process sees it")
	kubelet := flag.String("kubelet-dir", "", "kubelet's directory as this process sees it (the plugin sees it as /var/lib/kubelet)")
	volume := flag.String("volume", "", "volume ID; its disk must be linked by its serial in the plugin's disk directory")
	grow := flag.String("grow", "", "if set, a command run between publish and expand that grows the disk (expand is skipped without it)")
	flag.Parse()
	if *socket == "" || *kubelet == "" || *volume == "" {
		return fmt.Errorf("-socket, -kubelet-dir and -volume are required")
	}
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := csi.NewNodeClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const pluginKubelet = "/var/lib/kubelet"
	staging := pluginKubelet + "/plugins/kubernetes.io/csi/csi.knest.dev/smoke/globalmount"
	target := pluginKubelet + "/pods/smoke/volumes/kubernetes.io~csi/pvc-smoke/mount"
	local := func(p string) string { return filepath.Join(*kubelet, strings.TrimPrefix(p, pluginKubelet)) }
	// kubelet makes the parents of both paths.
	for _, p := range []string{filepath.Dir(local(staging)), filepath.Dir(local(target))} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			return err
		}
	}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	step := func(what string, err error, mounted map[string]bool) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for p, want := range mounted {
			got, err := isMounted(local(p))
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s: %s mounted on the node: %v, want %v", what, local(p), got, want)
			}
		}
		fmt.Printf("✓ %s\n", what)
		return nil
	}

	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: *volume, StagingTargetPath: staging, VolumeCapability: capability})
	if err := step("stage (format ext4, mount)", err, map[string]bool{staging: true}); err != nil {
		return err
	}
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: *volume, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability})
	if err := step("publish (bind mount)", err, map[string]bool{target: true}); err != nil {
		return err
	}
	file := filepath.Join(local(target), "smoke")
	if err := os.WriteFile(file, []byte("knest"), 0o600); err != nil {
		return fmt.Errorf("writing through the pod's path: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(local(staging), "smoke")); err != nil || string(b) != "knest" {
		return fmt.Errorf("the file written through the pod's path is not on the staged disk: %q, %v", b, err)
	}
	fmt.Println("✓ a file written through the pod's path is on the disk")
	if *grow != "" {
		before, err := size(local(target))
		if err != nil {
			return err
		}
		if out, err := runShell(*grow); err != nil {
			return fmt.Errorf("growing the disk: %v: %s", err, out)
		}
		_, err = c.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: *volume, VolumePath: target})
		if err := step("expand (resize2fs online)", err, nil); err != nil {
			return err
		}
		after, err := size(local(target))
		if err != nil {
			return err
		}
		if after <= before {
			return fmt.Errorf("expand: the filesystem has %d bytes, as before", after)
		}
	}
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: *volume, TargetPath: target})
	if err := step("unpublish", err, map[string]bool{target: false, staging: true}); err != nil {
		return err
	}
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: *volume, StagingTargetPath: staging})
	return step("unstage", err, map[string]bool{staging: false})
}

// isMounted reports whether path is a mount point in this process's mount table.
func isMounted(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && fields[4] == path {
			return true, nil
		}
	}
	return false, s.Err()
}
