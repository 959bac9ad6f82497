package standin

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestMachineSpecSizesAndPrioritizesControlPlanes(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "v1", "manifest.json"), []byte(`{"image":"knest/node:v1","kernelArgs":"console=ttyS0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := resource.MustParse("3Gi")
	vmi := func(role string) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{roleLabel: role}},
			Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2}, Memory: &kubevirtv1.Memory{Guest: &mem}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "knest/node:v1"}}}},
			},
		}
	}
	for role, nice := range map[string]int{"control-plane": 0, "worker": workerNice, "": workerNice} {
		m, _, err := machineSpec(vmi(role), root)
		if err != nil {
			t.Fatalf("role %q: %v", role, err)
		}
		if m.cpus != 2 || m.memMiB != 3072 || m.cmdline != "console=ttyS0" || m.nice != nice {
			t.Errorf("role %q: got cpus %d, memory %d MiB, cmdline %q, nice %d; want 2, 3072, console=ttyS0, %d",
				role, m.cpus, m.memMiB, m.cmdline, m.nice, nice)
		}
		want := []string{"qemu-system-x86_64", "-m", "1"}
		if nice != 0 {
			want = append([]string{"nice", "-n", strconv.Itoa(nice)}, want...)
		}
		if got := m.command([]string{"-m", "1"}); !slices.Equal(got, want) {
			t.Errorf("role %q: command %v, want %v", role, got, want)
		}
	}
}

// The guest's kernel arguments are the image's (or the VMI's kernelBoot's), followed
// under TCG by the TSC arguments this host allows, if any; under KVM the guest has
// kvm-clock and gets none. The accelerator is the one asked for.
func TestQemuArgsAccelAndTSCArgs(t *testing.T) {
	defer func(orig func() string) { tscKernelArgs = orig }(tscKernelArgs)
	for _, c := range []struct{ accel, tsc, wantAppend string }{
		{AccelTCG, "tsc=reliable tsc_early_khz=2445387", "console=ttyS0 tsc=reliable tsc_early_khz=2445387"},
		{AccelTCG, "", "console=ttyS0"},
		{AccelKVM, "tsc=reliable tsc_early_khz=2445387", "console=ttyS0"},
	} {
		tscKernelArgs = func() string { return c.tsc }
		m := &machine{cpus: 2, memMiB: 3072, cmdline: "console=ttyS0", accel: c.accel}
		args := m.qemuArgs("vm", "root.qcow2", "console.log")
		if got := argAfter(t, args, "-append"); got != c.wantAppend {
			t.Errorf("%s, TSC args %q: -append %q, want %q", c.accel, c.tsc, got, c.wantAppend)
		}
		if got, want := argAfter(t, args, "-machine"), "q35,accel="+c.accel; got != want {
			t.Errorf("%s: -machine %q, want %q", c.accel, got, want)
		}
	}
}

func argAfter(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no %s in %v", flag, args)
	}
	return args[i+1]
}

// An accelerator qemu is not asked for by name here is refused before anything
// starts; unset means TCG, which runs anywhere.
func TestStartRefusesUnknownAccel(t *testing.T) {
	_, err := Start(t.Context(), nil, Options{ImagesDir: t.TempDir(), StateDir: t.TempDir(), Accel: "hvf"})
	if err == nil || !strings.Contains(err.Error(), `accelerator "hvf": want tcg or kvm`) {
		t.Fatalf("Start with accelerator hvf: %v, want a refusal naming tcg and kvm", err)
	}
}
