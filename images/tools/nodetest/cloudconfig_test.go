package nodetest

import (
	"strings"
	"testing"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/yaml"
)

// The bootstrap data must parse as cloud-config and carry CABPK's files and command.
func TestInitCloudConfig(t *testing.T) {
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	in := kubeadmInput{ClusterName: "c", Version: "v1.34.3", Endpoint: "10.0.0.1:6443", PodCIDR: "10.243.0.0/16",
		ServiceCIDR: "10.95.0.0/16", DNSDomain: "tenant.local", CertSANs: []string{"10.0.0.1"},
		CRISocket: "unix:///var/run/containerd/containerd.sock", Token: "abcdef.0123456789abcdef", CACertHash: "sha256:x"}
	for name, render := range map[string]func() ([]byte, error){
		"init": func() ([]byte, error) { return initCloudConfig(certs.AsFiles(), in, "ssh-ed25519 AAAA test") },
		"join": func() ([]byte, error) { return joinCloudConfig(in, "ssh-ed25519 AAAA test") },
	} {
		b, err := render()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(string(b), "## template: jinja\n#cloud-config\n") {
			t.Errorf("%s: header missing", name)
		}
		var cc struct {
			WriteFiles []struct{ Path, Content string } `json:"write_files"`
			RunCmd     []string                         `json:"runcmd"`
			Users      []struct {
				Name string `json:"name"`
			} `json:"users"`
		}
		if err := yaml.Unmarshal(b, &cc); err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", name, err, b)
		}
		if len(cc.RunCmd) != 1 || !strings.Contains(cc.RunCmd[0], "kubeadm "+name) || !strings.HasSuffix(cc.RunCmd[0], "echo success > /run/cluster-api/bootstrap-success.complete") {
			t.Errorf("%s: runcmd %v", name, cc.RunCmd)
		}
		if len(cc.Users) != 1 || cc.Users[0].Name != "capk" {
			t.Errorf("%s: users %v", name, cc.Users)
		}
		var kubeadmCfg string
		for _, f := range cc.WriteFiles {
			if strings.HasPrefix(f.Path, "/run/kubeadm/") {
				kubeadmCfg = f.Content
			}
		}
		for _, doc := range strings.Split(kubeadmCfg, "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Errorf("%s: kubeadm config not YAML: %v\n%s", name, err, doc)
			}
		}
		if name == "init" && len(cc.WriteFiles) < 9 {
			t.Errorf("init: expected CAPI's certificates in write_files, got %d files", len(cc.WriteFiles))
		}
	}
}
