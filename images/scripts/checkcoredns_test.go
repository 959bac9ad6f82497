package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// check-coredns.sh against knest's own list (pkg/cluster/coredns.go) and node image
// manifests: one with both minors' CoreDNS, as every image is built now, and one with
// only v1.34's, as images were before an upgrade found the gap.
func TestCheckCoreDNS(t *testing.T) {
	manifest := func(tags ...string) string {
		dir := t.TempDir()
		m := `{"images": [` + "\n" + `    "registry.k8s.io/kube-proxy:v1.34.4",`
		for _, tag := range tags {
			m += "\n" + `    "registry.k8s.io/coredns/coredns:` + tag + `",`
		}
		m += "\n" + `    "registry.k8s.io/pause:3.10.1"` + "\n]}"
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	both, onlyOld, none := manifest("v1.12.1", "v1.13.1"), manifest("v1.12.1"), manifest()
	consts, err := filepath.Abs("../../pkg/cluster/coredns.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, version, out string
		ok                 bool
		says               string
	}{
		{"v1.34 image with both", "v1.34.4", both, true, "CoreDNS v1.12.1 v1.13.1 preloaded: v1.12.1 for v1.34"},
		{"v1.35 image with both", "v1.35.4", both, true, "v1.13.1 for v1.35"},
		{"v1.35 image without its own", "v1.35.4", onlyOld, false, "preloads CoreDNS v1.12.1, " + consts + " names v1.13.1"},
		{"v1.34 image without the next minor's", "v1.34.4", onlyOld, false, "lacks CoreDNS v1.13.1"},
		{"minor not listed", "v1.33.7", both, true, "WARNING: " + consts + " names no CoreDNS for v1.33"},
		{"no CoreDNS at all", "v1.34.4", none, false, "lists no CoreDNS image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := exec.Command("./check-coredns.sh", tt.version, tt.out, consts).CombinedOutput()
			g.Expect(err == nil).To(Equal(tt.ok), "%s", b)
			g.Expect(string(b)).To(ContainSubstring(tt.says))
		})
	}
}
