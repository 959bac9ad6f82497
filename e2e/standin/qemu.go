package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// machine is what one VMI becomes: a qemu process with software emulation (TCG),
// direct kernel boot, a copy-on-write overlay of the node image as its root disk, a
// cloud-init seed disk and a virtio NIC on the stand-in's bridge.
type machine struct {
	cpus    int
	memMiB  int64
	nice    int    // CPU priority of the qemu process, see workerNice
	accel   string // AccelTCG or AccelKVM
	image   nodeImage
	cmdline string
	seed    string // ISO path
	tap     string
	mac     string
	dir     string
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
}

// A real host places a VM only where its CPU requests fit; the stand-in runs every VM
// on one machine, which under emulation is always oversubscribed. So that the control
// planes keep the CPU their requests would guarantee, VMs that CAPK does not label as
// control-plane nodes run at a lower priority: they take what the control planes leave.
// Measured on 2 cores without it: a third VM booting starved the API server until its
// liveness probe restarted it, and it never started again while the VMs ran.
// How much lower: an emulated control plane keeps both its vCPU threads busy even at
// rest, so a worker's single thread gets its CFS weight's share of the 2 cores
// (2026-11-26, `top`): at nice 10 (weight 110 against 2 × 1024) 0.12 core, and its VM
// took 25 minutes to reach `kubeadm join`; at nice 3 (weight 526) 0.55, but the
// control plane, left 1.35 cores, lost its API server to the liveness probe once the
// worker's pods started, and it crash-looped until the worker went back to nice 10.
// At nice 5 (weight 335) a joining worker got 0.38–0.48 and the API server, though
// slow for 5 minutes once the worker's pods started, kept running (docs/e2e.md).
const (
	roleLabel        = "cluster.x-k8s.io/role" // set by CAPK on VMs and VMIs
	controlPlaneRole = "control-plane"
	workerNice       = 5
)

// machineSpec reads CPU, memory, root image, kernel command line and cloud-init from
// a VMI spec the way KubeVirt does for the fields CAPK templates use. Anything the
// stand-in cannot run is an error, reported on the VMI.
func machineSpec(vmi *kubevirtv1.VirtualMachineInstance, imagesRoot string) (*machine, *kubevirtv1.Volume, error) {
	spec := vmi.Spec
	m := &machine{cpus: 1, memMiB: 1024, accel: AccelTCG}
	if vmi.Labels[roleLabel] != controlPlaneRole {
		m.nice = workerNice
	}
	if c := spec.Domain.CPU; c != nil {
		m.cpus = int(max(c.Cores, 1) * max(c.Sockets, 1) * max(c.Threads, 1))
	} else if q, ok := spec.Domain.Resources.Requests["cpu"]; ok {
		m.cpus = int(max(q.Value(), 1))
	}
	var mem *resource.Quantity
	if spec.Domain.Memory != nil && spec.Domain.Memory.Guest != nil {
		mem = spec.Domain.Memory.Guest
	} else if q, ok := spec.Domain.Resources.Requests["memory"]; ok {
		mem = &q
	}
	if mem != nil {
		m.memMiB = mem.Value() / (1 << 20)
	}

	var rootRef string
	var seed *kubevirtv1.Volume
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		switch {
		case v.ContainerDisk != nil:
			if rootRef != "" {
				return nil, nil, fmt.Errorf("volume %s: the stand-in runs one containerDisk per VM", v.Name)
			}
			rootRef = v.ContainerDisk.Image
		case v.CloudInitConfigDrive != nil || v.CloudInitNoCloud != nil:
			seed = v
		default:
			return nil, nil, fmt.Errorf("volume %s: the stand-in supports containerDisk, cloudInitConfigDrive and cloudInitNoCloud volumes only (DataVolumes need CDI)", v.Name)
		}
	}
	if rootRef == "" {
		return nil, nil, fmt.Errorf("no containerDisk volume: nothing to boot")
	}
	img, err := resolveImage(imagesRoot, rootRef)
	if err != nil {
		return nil, nil, err
	}
	m.image, m.cmdline = img, img.KernelArgs
	// The node image's disk has no bootloader: it always boots its own kernel directly.
	// A kernelBoot image must name the same node image; its kernel arguments win.
	if fw := spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil {
		kb := fw.KernelBoot
		if kb.Container != nil {
			kimg, err := resolveImage(imagesRoot, kb.Container.Image)
			if err != nil {
				return nil, nil, err
			}
			m.image.Dir = kimg.Dir
		}
		if kb.KernelArgs != "" {
			m.cmdline = kb.KernelArgs
		}
	}
	return m, seed, nil
}

func (m *machine) start(name string) error {
	overlay := filepath.Join(m.dir, "root.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", m.image.disk(), overlay).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	console, err := os.Create(filepath.Join(m.dir, "console.log"))
	if err != nil {
		return err
	}
	argv := m.command(m.qemuArgs(name, overlay, console.Name()))
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Stdout, m.cmd.Stderr = console, console
	// No VM outlives the stand-in, as no VM outlives its virt-launcher pod.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		console.Close()
		return fmt.Errorf("failed to start qemu: %w", err)
	}
	m.done = make(chan struct{})
	go func() {
		m.exitErr = m.cmd.Wait()
		console.Close()
		close(m.done)
	}()
	return nil
}

// qemuArgs are qemu's arguments for the VM, with the root disk overlay and the
// console log at the given paths. `-cpu max` under KVM is what kvm-probe.sh boots.
func (m *machine) qemuArgs(name, overlay, console string) []string {
	cmdline := m.cmdline
	if m.accel == AccelTCG {
		// Under KVM the guest keeps time with kvm-clock; the TSC arguments are for
		// an emulated CPU.
		cmdline = strings.TrimSpace(cmdline + " " + tscKernelArgs())
	}
	return []string{
		"-name", name, "-machine", "q35,accel=" + m.accel, "-cpu", "max",
		"-smp", strconv.Itoa(m.cpus), "-m", strconv.FormatInt(m.memMiB, 10),
		"-nographic", "-serial", "file:" + console, "-monitor", "none", "-no-reboot",
		"-kernel", m.image.kernel(), "-initrd", m.image.initrd(), "-append", cmdline,
		"-drive", "if=virtio,format=qcow2,discard=unmap,cache=unsafe,file=" + overlay,
		"-drive", "if=virtio,format=raw,readonly=on,file=" + m.seed,
		"-netdev", "tap,id=n0,ifname=" + m.tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + m.mac,
		"-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0",
	}
}

// command is the qemu command line with args, under nice for a lowered priority:
// nice sets it before qemu starts its vCPU threads, which inherit it.
func (m *machine) command(args []string) []string {
	argv := append([]string{"qemu-system-x86_64"}, args...)
	if m.nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(m.nice)}, argv...)
	}
	return argv
}

func (m *machine) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop ends qemu and waits for it: the domain is destroyed, not shut down, as
// KubeVirt does once the grace period is over.
func (m *machine) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
	}
}

// pid is the qemu process id, for tests that kill a VM from outside.
func (m *machine) pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// writeSeed builds the cloud-init disk KubeVirt would attach: a ConfigDrive (volume
// label config-2, openstack/latest/{meta_data.json,user_data,network_data.json}) or a
// NoCloud seed (label cidata, meta-data, user-data, network-config). The hostname is
// the VMI's name, which is what makes the tenant Node's name equal the VM's name.
func writeSeed(dir string, vmi *kubevirtv1.VirtualMachineInstance, configDrive bool, userData, networkData []byte) (string, error) {
	root := filepath.Join(dir, "seed")
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	hostname := vmi.Name
	if vmi.Spec.Hostname != "" {
		hostname = vmi.Spec.Hostname
	}
	instanceID := vmi.Name + "." + vmi.Namespace
	files := map[string][]byte{}
	label := "cidata"
	if configDrive {
		label = "config-2"
		meta, err := json.Marshal(map[string]string{"instance_id": instanceID, "hostname": hostname, "uuid": string(vmi.UID)})
		if err != nil {
			return "", err
		}
		files["openstack/latest/meta_data.json"] = meta
		files["openstack/latest/user_data"] = userData
		if networkData != nil {
			files["openstack/latest/network_data.json"] = networkData
		}
	} else {
		files["meta-data"] = []byte(fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instanceID, hostname))
		files["user-data"] = userData
		if networkData != nil {
			files["network-config"] = networkData
		}
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return "", err
		}
	}
	iso := filepath.Join(dir, "seed.iso")
	if out, err := exec.Command("genisoimage", "-quiet", "-output", iso, "-volid", label, "-joliet", "-rock", root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("genisoimage (apt-get install genisoimage): %v: %s", err, strings.TrimSpace(string(out)))
	}
	// The bootstrap data holds the cluster's CA key: keep only the ISO qemu needs.
	return iso, os.RemoveAll(root)
}
