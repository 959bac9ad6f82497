package nodetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// vm is one qemu (TCG) guest with direct kernel boot, a copy-on-write overlay of the
// node image as its virtio root disk, a ConfigDrive and a virtio NIC on the bridge.
type vm struct {
	name    string
	mac     string
	ip      string
	cpus    int
	memMiB  int
	dir     string
	cmd     *exec.Cmd
	started time.Time

	mu         sync.Mutex
	milestones map[string]time.Duration
	console    *os.File
}

// milestones seen on the serial console, by the first line that matches.
var consoleMilestones = []struct {
	name string
	re   *regexp.Regexp
}{
	{"kernel", regexp.MustCompile(`Linux version \d`)},
	{"cloud-init", regexp.MustCompile(`Cloud-init v\. .* running 'init-local'`)},
	{"kubeadm", regexp.MustCompile(`\[(init|preflight)\] (Using Kubernetes version|Running pre-flight checks)`)},
	{"api-ready", regexp.MustCompile(`(\[api-check\] The API server is healthy|\[control-plane-check\] kube-apiserver is healthy)`)},
	{"kubeadm-done", regexp.MustCompile(`(Your Kubernetes control-plane has initialized successfully|This node has joined the cluster)`)},
	{"cloud-init-done", regexp.MustCompile(`Cloud-init v\. .* finished at`)},
}

type image struct {
	disk, kernel, initrd, cmdline string
}

func (v *vm) start(n *network, img image, configDrive string) error {
	overlay := filepath.Join(v.dir, v.name+".qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.disk, overlay).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	tap, err := n.addTap()
	if err != nil {
		return err
	}
	console, err := os.Create(filepath.Join(v.dir, v.name+".console.log"))
	if err != nil {
		return err
	}
	v.console = console
	v.milestones = map[string]time.Duration{}
	args := n.in("qemu-system-x86_64",
		"-name", v.name, "-machine", "q35,accel=tcg", "-cpu", "max",
		"-smp", fmt.Sprint(v.cpus), "-m", fmt.Sprint(v.memMiB),
		"-nographic", "-serial", "stdio", "-monitor", "none", "-no-reboot",
		"-kernel", img.kernel, "-initrd", img.initrd, "-append", img.cmdline,
		"-drive", "if=virtio,format=qcow2,discard=unmap,cache=unsafe,file="+overlay,
		"-drive", "if=virtio,format=raw,readonly=on,file="+configDrive,
		"-netdev", "tap,id=n0,ifname="+tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+v.mac,
		"-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0",
	)
	v.cmd = exec.Command(args[0], args[1:]...)
	stdout, err := v.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	v.cmd.Stderr = console
	v.started = time.Now()
	if err := v.cmd.Start(); err != nil {
		return fmt.Errorf("failed to start qemu for %s: %w", v.name, err)
	}
	go v.readConsole(stdout)
	return nil
}

func (v *vm) readConsole(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		at := time.Since(v.started)
		fmt.Fprintf(v.console, "[%8.2f] %s\n", at.Seconds(), line)
		v.mu.Lock()
		for _, m := range consoleMilestones {
			if _, seen := v.milestones[m.name]; !seen && m.re.MatchString(line) {
				v.milestones[m.name] = at
			}
		}
		v.mu.Unlock()
	}
}

// mark records a milestone observed from outside (e.g. node Ready).
func (v *vm) mark(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, seen := v.milestones[name]; !seen {
		v.milestones[name] = time.Since(v.started)
	}
}

func (v *vm) timings() map[string]time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]time.Duration{}
	for k, d := range v.milestones {
		out[k] = d
	}
	return out
}

func (v *vm) stop() {
	if v.cmd != nil && v.cmd.Process != nil {
		_ = v.cmd.Process.Kill()
		_ = v.cmd.Wait()
	}
	if v.console != nil {
		_ = v.console.Close()
	}
}
