package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// check-coredns.sh against knest's own list (pkg/cluster/coredns.go) and a node
// image manifest that preloads CoreDNS v1.12.1, as v1.34's does.
func TestCheckCoreDNS(t *testing.T) {
	out := t.TempDir()
	manifest := `{"images": [
    "registry.k8s.io/kube-proxy:v1.34.4",
    "registry.k8s.io/coredns/coredns:v1.12.1",
    "registry.k8s.io/pause:3.10.1"
]}`
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	consts, err := filepath.Abs("../../pkg/cluster/coredns.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		version string
		ok      bool
		says    string
	}{
		{"v1.34.4", true, "CoreDNS v1.12.1: as"},
		{"v1.35.4", false, "preloads CoreDNS v1.12.1, " + consts + " names v1.13.1"},
		{"v1.33.7", true, "WARNING: " + consts + " names no CoreDNS for v1.33"},
	} {
		t.Run(tt.version, func(t *testing.T) {
			g := NewWithT(t)
			b, err := exec.Command("./check-coredns.sh", tt.version, out, consts).CombinedOutput()
			g.Expect(err == nil).To(Equal(tt.ok), "%s", b)
			g.Expect(string(b)).To(ContainSubstring(tt.says))
		})
	}
}
