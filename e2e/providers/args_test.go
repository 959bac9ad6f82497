package providers

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// clusterctlDefault is clusterctl's ${VAR:=default} substitution.
var clusterctlDefault = regexp.MustCompile(`\$\{[A-Z0-9_]+:=([^}]*)\}`)

// TestArgsAsTheManifests holds the managers' arguments to what each release's
// config/manager/manager.yaml passes with clusterctl's defaults (a feature gate that
// a release drops makes its manager exit; one it turns on changes behaviour), less
// what the test bed sets itself (leader election, diagnostics, health and webhooks).
func TestArgsAsTheManifests(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}", capiModule, capkModule).Output()
	g.Expect(err).NotTo(HaveOccurred())
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		dirs[path] = dir
	}
	for _, p := range all {
		t.Run(p.name, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(filepath.Join(dirs[p.module], p.config, "manager", "manager.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			var want []string
			for _, doc := range strings.Split(string(raw), "\n---") {
				d := &appsv1.Deployment{}
				if yaml.Unmarshal([]byte(doc), d) != nil || d.Kind != "Deployment" {
					continue
				}
				for _, c := range d.Spec.Template.Spec.Containers {
					for _, a := range c.Args {
						a = clusterctlDefault.ReplaceAllString(a, "$1")
						switch strings.SplitN(a, "=", 2)[0] {
						case "--leader-elect", "--diagnostics-address", "--insecure-diagnostics", "--health-addr", "--metrics-bind-addr":
							continue
						}
						want = append(want, a)
					}
				}
			}
			g.Expect(want).NotTo(BeEmpty(), "no manager arguments found")
			g.Expect(p.args).To(ConsistOf(want))
		})
	}
}
