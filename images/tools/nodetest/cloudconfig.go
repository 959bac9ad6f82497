package nodetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The bootstrap data below has the shape Cluster API's kubeadm bootstrap provider
// (CABPK v1.11) renders: a jinja-templated #cloud-config whose write_files carry the
// certificates and /run/kubeadm/kubeadm*.yaml, a runcmd that runs kubeadm and then
// writes /run/cluster-api/bootstrap-success.complete, plus the `capk` user CAPK adds
// with its SSH key. It is written here (CABPK's renderer is internal to its module).
const cloudConfigTemplate = `## template: jinja
#cloud-config

write_files:
{{- range .Files }}
-   path: {{ .Path }}
    owner: {{ .Owner }}
    permissions: '{{ .Permissions }}'
    content: |
{{ indent 6 .Content }}
{{- end }}
-   path: /run/cluster-api/placeholder
    owner: root:root
    permissions: '0640'
    content: "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)"
runcmd:
  - '{{ .Command }} && echo success > /run/cluster-api/bootstrap-success.complete'
users:
- name: capk
  gecos: CAPK User
  sudo: ALL=(ALL) NOPASSWD:ALL
  groups: users, admin
  ssh_authorized_keys:
  - {{ .SSHKey }}
`

type cloudConfig struct {
	Files   []bootstrapv1.File
	Command string
	SSHKey  string
}

func (c cloudConfig) render() ([]byte, error) {
	t, err := template.New("cloud-config").Funcs(template.FuncMap{
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
		},
	}).Parse(cloudConfigTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// kubeadmInput is what CABPK and KCP fill into the kubeadm configuration from the
// Cluster (network, endpoint), the KubeadmControlPlane (version, SANs,
// nodeRegistration) and the bootstrap token it creates for joins.
type kubeadmInput struct {
	ClusterName     string
	Version         string
	Endpoint        string // host:port
	PodCIDR         string
	ServiceCIDR     string
	DNSDomain       string
	CertSANs        []string
	CRISocket       string
	Token           string
	CACertHash      string
	IgnorePreflight []string
}

// Under software emulation on a shared host the API server answers slowly: with the
// default leader-election deadlines (renew within 10s) kube-controller-manager and
// kube-scheduler lose their lease and restart in a loop (seen in the first run: no
// DaemonSet pod was ever created), and kubeadm's default 4m wait for the API server
// was nearly used up (3m47s). These are settings a KubeadmControlPlane can carry.
const leaderElectionTemplate = `{{ define "leaderElection" }}
  extraArgs:
  - name: leader-elect-lease-duration
    value: 60s
  - name: leader-elect-renew-deadline
    value: 45s
  - name: leader-elect-retry-period
    value: 5s{{ end }}`

const initConfigTemplate = `---
apiServer:
  certSANs:{{ range .CertSANs }}
  - {{ . }}{{ end }}
apiVersion: kubeadm.k8s.io/v1beta4
clusterName: {{ .ClusterName }}
controlPlaneEndpoint: {{ .Endpoint }}
controllerManager:{{ template "leaderElection" }}
dns: {}
etcd:
  local: {}
kind: ClusterConfiguration
kubernetesVersion: {{ .Version }}
networking:
  dnsDomain: {{ .DNSDomain }}
  podSubnet: {{ .PodCIDR }}
  serviceSubnet: {{ .ServiceCIDR }}
scheduler:{{ template "leaderElection" }}
---
apiVersion: kubeadm.k8s.io/v1beta4
bootstrapTokens:
- groups:
  - system:bootstrappers:kubeadm:default-node-token
  token: {{ .Token }}
  ttl: 2h0m0s
  usages:
  - signing
  - authentication
kind: InitConfiguration
localAPIEndpoint: {}
timeouts:
  controlPlaneComponentHealthCheck: 10m0s
  kubeletHealthCheck: 10m0s
nodeRegistration:
  criSocket: {{ .CRISocket }}
  imagePullPolicy: IfNotPresent
  imagePullSerial: true{{ if .IgnorePreflight }}
  ignorePreflightErrors:{{ range .IgnorePreflight }}
  - {{ . }}{{ end }}{{ end }}
`

const joinConfigTemplate = `---
apiVersion: kubeadm.k8s.io/v1beta4
discovery:
  bootstrapToken:
    apiServerEndpoint: {{ .Endpoint }}
    caCertHashes:
    - {{ .CACertHash }}
    token: {{ .Token }}
kind: JoinConfiguration
timeouts:
  discovery: 10m0s
  tlsBootstrap: 10m0s
  kubeletHealthCheck: 10m0s
nodeRegistration:
  criSocket: {{ .CRISocket }}
  imagePullPolicy: IfNotPresent
  imagePullSerial: true{{ if .IgnorePreflight }}
  ignorePreflightErrors:{{ range .IgnorePreflight }}
  - {{ . }}{{ end }}{{ end }}
`

func renderKubeadm(tpl string, in kubeadmInput) (string, error) {
	t, err := template.New("kubeadm").Parse(leaderElectionTemplate)
	if err != nil {
		return "", err
	}
	if t, err = t.Parse(tpl); err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, in); err != nil {
		return "", err
	}
	return b.String(), nil
}

// initCloudConfig is the control plane's bootstrap data: CAPI's certificates and
// `kubeadm init`.
func initCloudConfig(certs []bootstrapv1.File, in kubeadmInput, sshKey string) ([]byte, error) {
	cfg, err := renderKubeadm(initConfigTemplate, in)
	if err != nil {
		return nil, err
	}
	files := append(certs, bootstrapv1.File{Path: "/run/kubeadm/kubeadm.yaml", Owner: "root:root", Permissions: "0640", Content: cfg})
	return cloudConfig{Files: files, Command: "kubeadm init --config /run/kubeadm/kubeadm.yaml ", SSHKey: sshKey}.render()
}

// joinCloudConfig is a worker's bootstrap data: token discovery and `kubeadm join`.
func joinCloudConfig(in kubeadmInput, sshKey string) ([]byte, error) {
	cfg, err := renderKubeadm(joinConfigTemplate, in)
	if err != nil {
		return nil, err
	}
	files := []bootstrapv1.File{{Path: "/run/kubeadm/kubeadm-join-config.yaml", Owner: "root:root", Permissions: "0640", Content: cfg}}
	return cloudConfig{Files: files, Command: "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml ", SSHKey: sshKey}.render()
}

// configDrive writes the ISO KubeVirt builds for cloudInitConfigDrive (volume label
// config-2, openstack/latest/meta_data.json and user_data) and returns its path.
func configDrive(dir, name string, userData []byte) (string, error) {
	root := filepath.Join(dir, name+"-configdrive")
	latest := filepath.Join(root, "openstack", "latest")
	if err := os.MkdirAll(latest, 0o755); err != nil {
		return "", err
	}
	meta, err := json.Marshal(map[string]any{
		"uuid":          name + "-0000-0000-0000-000000000000",
		"hostname":      name,
		"instance_type": "",
	})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(latest, "meta_data.json"), meta, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(latest, "user_data"), userData, 0o600); err != nil {
		return "", err
	}
	iso := filepath.Join(dir, name+"-configdrive.iso")
	if out, err := exec.Command("genisoimage", "-quiet", "-output", iso, "-volid", "config-2", "-joliet", "-rock", root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("genisoimage: %v: %s", err, out)
	}
	return iso, nil
}
