package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// Each stub stands in for qemu-system-x86_64 as it behaved on a machine of ours with
// a /dev/kvm (its serial console goes to the file named by -serial file:PATH).
const stubPrologue = `#!/usr/bin/env bash
echo ran >>"$(dirname "$0")/ran"
for a in "$@"; do case $a in file:*) console=${a#file:} ;; esac; done
`

func TestKVMProbe(t *testing.T) {
	tests := []struct {
		name   string
		stub   string
		device bool
		env    []string
		want   string
		why    string
		ran    bool
	}{
		{
			name: "no device", want: "tcg", why: "is missing or not writable",
			stub: `exit 0`,
		},
		{
			name: "qemu aborts on a KVM MSR", device: true, ran: true, want: "tcg", why: "exited with status 134: qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69",
			stub: `echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2; kill -ABRT $$`,
		},
		{
			name: "the guest hangs after its setup code", device: true, ran: true, env: []string{"KNEST_KVM_PROBE_SECONDS=2"},
			want: "tcg", why: "did not boot under KVM within 2 s; last console line: Probing EDD (edd=off to disable)... ok",
			stub: `printf 'Probing EDD (edd=off to disable)... ok\r\n' >"$console"; exec sleep 60`,
		},
		{
			name: "the guest boots", device: true, ran: true, want: "kvm", why: "a kernel booted under KVM",
			stub: `printf '[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\r\n' >"$console"`,
		},
		{
			name: "chosen by hand", device: true, env: []string{"KNEST_ACCEL=tcg"}, want: "tcg", why: "set by KNEST_ACCEL",
			stub: `exit 0`,
		},
	}
	probe, err := filepath.Abs("kvm-probe.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			g.Expect(os.WriteFile(filepath.Join(dir, "qemu-system-x86_64"), []byte(stubPrologue+tt.stub+"\n"), 0o755)).To(Succeed())
			device := filepath.Join(dir, "kvm")
			if tt.device {
				g.Expect(os.WriteFile(device, nil, 0o600)).To(Succeed())
			}
			cmd := exec.Command(probe, "vmlinuz")
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "KNEST_KVM_DEVICE="+device, "KNEST_ACCEL=")
			cmd.Env = append(cmd.Env, tt.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred(), stderr.String())
			g.Expect(string(out)).To(Equal(tt.want + "\n"))
			g.Expect(stderr.String()).To(ContainSubstring(tt.why))
			_, err = os.Stat(filepath.Join(dir, "ran"))
			g.Expect(err == nil).To(Equal(tt.ran), "whether qemu was started")
		})
	}
}
