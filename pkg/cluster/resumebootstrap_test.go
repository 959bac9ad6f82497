package cluster_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/pkg/cluster"
)

// fakeKubeadm logs its arguments and fails the first $FAILS calls that start with
// $FAIL_ON. Like kubeadm, reset deletes the certificates and join fails without the
// cluster CA's key when $NEEDS_CA is set (a control-plane join).
const fakeKubeadm = `#!/bin/sh
echo "$*" >>"$LOG"
case "$*" in
reset*) rm -rf "$PKI" ;;
join*) if [ -n "${NEEDS_CA:-}" ] && [ ! -f "$PKI/ca.key" ]; then echo "no CA" >>"$LOG"; exit 1; fi ;;
esac
case "$*" in
"$FAIL_ON"*)
	n=$(cat "$COUNT" 2>/dev/null || echo 0)
	if [ "$n" -lt "$FAILS" ]; then echo $((n + 1)) >"$COUNT"; exit 1; fi ;;
esac
`

type resumeRun struct {
	dir   string
	calls []string
	err   error
}

func (r resumeRun) sentinel() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "sentinel"))
	return string(b)
}

// runResume runs the resume script as rendered into the bootstrap data, with kubeadm
// replaced by fakeKubeadm and the node's paths under a temporary directory.
func runResume(t *testing.T, mode string, setup func(dir string), env ...string) resumeRun {
	t.Helper()
	graph, err := cluster.Render(demo(), cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var script string
	for _, f := range graph.ControlPlane.Spec.KubeadmConfigSpec.Files {
		if f.Path == "/usr/local/sbin/knest-resume-bootstrap" {
			script = f.Content
		}
	}
	dir := t.TempDir()
	for _, d := range []string{"bin", "tmp", "run/kubeadm", "etc/kubernetes/manifests", "etc/kubernetes/pki/etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("resume.sh", script, 0o755)
	write("bin/kubeadm", fakeKubeadm, 0o755)
	setup(dir)

	cmd := exec.Command("sh", filepath.Join(dir, "resume.sh"), mode)
	cmd.Env = append([]string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin",
		"LOG=" + filepath.Join(dir, "calls"), "COUNT=" + filepath.Join(dir, "count"),
		"KNEST_SENTINEL=" + filepath.Join(dir, "sentinel"),
		"KNEST_KUBEADM_DIR=" + filepath.Join(dir, "run/kubeadm"),
		"KNEST_KUBERNETES_DIR=" + filepath.Join(dir, "etc/kubernetes"), "PKI=" + filepath.Join(dir, "etc/kubernetes/pki"),
		"TMPDIR=" + filepath.Join(dir, "tmp"), "KNEST_ETCD_READYZ=http://127.0.0.1:1/readyz", "KNEST_RESUME_DELAY=0", "KNEST_RESUME_ATTEMPTS=3", "FAILS=0", "FAIL_ON=none",
	}, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	r := resumeRun{dir: dir, err: err}
	if b, err := os.ReadFile(filepath.Join(dir, "calls")); err == nil {
		r.calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return r
}

func file(dir, path string) {
	if err := os.WriteFile(filepath.Join(dir, path), []byte("x"), 0o644); err != nil {
		panic(err)
	}
}

func TestResumeBootstrapRetriesAFailedJoin(t *testing.T) {
	g := NewWithT(t)
	r := runResume(t, "join", func(dir string) { file(dir, "run/kubeadm/kubeadm-join-config.yaml") },
		"FAIL_ON=join", "FAILS=1")
	g.Expect(r.err).NotTo(HaveOccurred())
	join := "join --config " + filepath.Join(r.dir, "run/kubeadm/kubeadm-join-config.yaml")
	g.Expect(r.calls).To(Equal([]string{"reset --force", join, "reset --force", join}))
	g.Expect(r.sentinel()).To(Equal("success\n"))
}

func TestResumeBootstrapGivesUpAfterItsAttempts(t *testing.T) {
	g := NewWithT(t)
	r := runResume(t, "join", func(dir string) { file(dir, "run/kubeadm/kubeadm-join-config.yaml") },
		"FAIL_ON=join", "FAILS=99")
	g.Expect(r.err).To(HaveOccurred())
	g.Expect(r.calls).To(HaveLen(6), "three resets and joins")
	g.Expect(r.sentinel()).To(BeEmpty())
}

func TestResumeBootstrapDoesNothingAfterSuccess(t *testing.T) {
	g := NewWithT(t)
	for _, mode := range []string{"init", "join"} {
		r := runResume(t, mode, func(dir string) {
			file(dir, "sentinel")
			file(dir, "run/kubeadm/kubeadm.yaml")
			file(dir, "run/kubeadm/kubeadm-join-config.yaml")
		})
		g.Expect(r.err).NotTo(HaveOccurred(), mode)
		g.Expect(r.calls).To(BeEmpty(), mode)
	}
}

func TestResumeBootstrapResumesInitOnlyWithAControlPlane(t *testing.T) {
	g := NewWithT(t)
	initConfig := func(dir string) { file(dir, "run/kubeadm/kubeadm.yaml") }

	// kubeadm failed before it wrote the control plane: a new machine is the fix.
	r := runResume(t, "init", func(dir string) { initConfig(dir); file(dir, "etc/kubernetes/admin.conf") })
	g.Expect(r.err).To(HaveOccurred())
	g.Expect(r.calls).To(BeEmpty())

	// Failed in the addon phase, as measured: the tail phases run again until they pass.
	r = runResume(t, "init", func(dir string) {
		initConfig(dir)
		file(dir, "etc/kubernetes/admin.conf")
		file(dir, "etc/kubernetes/manifests/kube-apiserver.yaml")
	}, "FAIL_ON=init phase addon", "FAILS=1")
	g.Expect(r.err).NotTo(HaveOccurred())
	cfg := " --config " + filepath.Join(r.dir, "run/kubeadm/kubeadm.yaml")
	phases := []string{"init phase upload-config all" + cfg, "init phase mark-control-plane" + cfg,
		"init phase bootstrap-token" + cfg, "init phase kubelet-finalize all" + cfg, "init phase addon all" + cfg}
	g.Expect(r.calls).To(Equal(append(append([]string{}, phases...), phases...)))
	g.Expect(r.sentinel()).To(Equal("success\n"))
}

func TestResumeBootstrapRetriesAControlPlaneJoinWithItsCertificates(t *testing.T) {
	g := NewWithT(t)
	// KCP's post command says init; the join config says it is a join. It failed in
	// check-etcd (the old control plane too slow to answer), before its etcd member.
	cpJoin := func(dir string) {
		file(dir, "run/kubeadm/kubeadm-join-config.yaml")
		for _, f := range []string{"ca.crt", "ca.key", "sa.key", "sa.pub", "etcd/ca.crt", "etcd/ca.key"} {
			file(dir, "etc/kubernetes/pki/"+f)
		}
		file(dir, "etc/kubernetes/manifests/kube-apiserver.yaml")
	}
	r := runResume(t, "init", cpJoin, "FAIL_ON=join", "FAILS=1", "NEEDS_CA=1")
	g.Expect(r.err).NotTo(HaveOccurred())
	join := "join --config " + filepath.Join(r.dir, "run/kubeadm/kubeadm-join-config.yaml")
	g.Expect(r.calls).To(Equal([]string{"reset --force", join, "reset --force", join}))
	g.Expect(r.sentinel()).To(Equal("success\n"))
	g.Expect(filepath.Join(r.dir, "etc/kubernetes/pki/etcd/ca.key")).To(BeAnExistingFile(), "restored after the reset")
	g.Expect(os.ReadDir(filepath.Join(r.dir, "tmp"))).To(BeEmpty(), "the copy of the CAs is removed")

	// Once its etcd member may have been added, it is never reset; with no local etcd
	// answering, the machine is KCP's to remediate.
	r = runResume(t, "init", func(dir string) { cpJoin(dir); file(dir, "etc/kubernetes/manifests/etcd.yaml") })
	g.Expect(r.err).To(HaveOccurred())
	g.Expect(r.calls).To(BeEmpty())
	g.Expect(r.sentinel()).To(BeEmpty())
}

// etcdReadyz serves an etcd /readyz?verbose answer: 503 (a slow linearizable read, as
// measured while a new member joins) with the non_learner check as given.
func etcdReadyz(t *testing.T, nonLearner string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "[+]data_corruption ok\n[+]serializable_read ok\n[-]linearizable_read failed: etcdserver: request timed out\n%s\n", nonLearner)
	}))
	t.Cleanup(srv.Close)
	return "KNEST_ETCD_READYZ=" + srv.URL + "/readyz?verbose"
}

// kubeadm v1.35.4's etcd-join fails when a promotion succeeded but its answer timed
// out (kubernetes/kubeadm#3317): the member is a voter, and the join goes on after it.
func TestResumeBootstrapFinishesAControlPlaneJoinWhoseMemberIsAVoter(t *testing.T) {
	g := NewWithT(t)
	cpJoinAfterEtcd := func(dir string) {
		file(dir, "run/kubeadm/kubeadm-join-config.yaml")
		file(dir, "etc/kubernetes/manifests/etcd.yaml")
	}
	r := runResume(t, "init", cpJoinAfterEtcd, etcdReadyz(t, "[+]non_learner ok"), "FAIL_ON=join phase control-plane-join", "FAILS=1")
	g.Expect(r.err).NotTo(HaveOccurred())
	cfg := " --config " + filepath.Join(r.dir, "run/kubeadm/kubeadm-join-config.yaml")
	g.Expect(r.calls).To(Equal([]string{
		"join phase kubelet-wait-bootstrap" + cfg, "join phase control-plane-join mark-control-plane" + cfg,
		"join phase kubelet-wait-bootstrap" + cfg, "join phase control-plane-join mark-control-plane" + cfg, "join phase wait-control-plane" + cfg,
	}), "the phases after etcd-join, again after a failure; never a reset")
	g.Expect(r.sentinel()).To(Equal("success\n"))

	// Still a learner: nothing is run, and the machine is left to KCP's remediation.
	r = runResume(t, "init", cpJoinAfterEtcd, etcdReadyz(t, "[-]non_learner failed: etcdserver: learner"))
	g.Expect(r.err).To(HaveOccurred())
	g.Expect(r.calls).To(BeEmpty())
	g.Expect(r.sentinel()).To(BeEmpty())
}

// kubeadm runs once and the script after it: init on the control plane (a joining
// control-plane machine is told init too, see above), join on workers.
func TestRenderRunsResumeBootstrapAfterKubeadm(t *testing.T) {
	g := NewWithT(t)
	graph, err := cluster.Render(demo(), cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	kcs := graph.ControlPlane.Spec.KubeadmConfigSpec
	g.Expect(kcs.PostKubeadmCommands).To(Equal([]string{"/usr/local/sbin/knest-resume-bootstrap init"}))
	g.Expect(kcs.Files).To(ContainElement(HaveField("Path", "/usr/local/sbin/knest-resume-bootstrap")))
	for _, p := range graph.Pools {
		ws := p.BootstrapTemplate.Spec.Template.Spec
		g.Expect(ws.PostKubeadmCommands).To(Equal([]string{"/usr/local/sbin/knest-resume-bootstrap join"}), p.Name)
		g.Expect(ws.Files).To(ConsistOf(HaveField("Path", "/usr/local/sbin/knest-resume-bootstrap")), p.Name)
	}
}
