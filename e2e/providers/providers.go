// Package providers runs the real Cluster API provider managers — CAPI core, the
// kubeadm bootstrap provider (CABPK), the kubeadm control-plane provider (KCP) and
// the KubeVirt infrastructure provider (CAPK) — as processes against a running
// test bed (internal/testenv), the way a clusterctl installation runs them:
//
//   - the binaries are built from their Go modules at the pinned versions
//     (`make providers`, hack/providers.mk);
//   - their webhooks are served over TLS with a certificate from a CA made here, and
//     the webhook configurations of each module's config/webhook/manifests.yaml are
//     installed with clientConfig.url pointing at the process instead of a Service;
//   - the CRDs that each module's config/crd/kustomization.yaml patches for
//     conversion get that conversion webhook the same way (CAPI's CRDs serve v1beta1
//     and v1beta2 and store v1beta2);
//   - feature gates are clusterctl's defaults; leader election, metrics and health
//     probes are off (one instance each, no ports to clash between test packages).
//
// They run with the test bed's admin credentials, not their ClusterRoles.
package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/e2e/internal/webhook"
	"github.com/knest-dev/knest/internal/childproc"
	"github.com/knest-dev/knest/internal/testenv"
)

// EnvProviders names the directory holding the provider managers (`make providers`;
// `eval "$(make -s providers-env)"` sets it for a manual `go test`).
const EnvProviders = "KNEST_PROVIDERS"

const (
	capiModule = "sigs.k8s.io/cluster-api"
	capkModule = "sigs.k8s.io/cluster-api-provider-kubevirt"

	// A cold start of four managers on a busy 2-core machine takes a while.
	startTimeout = 3 * time.Minute
)

// provider is one manager and where its manifests live in its module.
type provider struct {
	// name is the manager's log name and clusterctl's namePrefix without the dash.
	name   string
	binary string
	module string
	// config is the kustomize config directory inside the module.
	config string
	args   []string
}

// The managers with the arguments of their config/manager/manager.yaml, feature gates
// at the defaults clusterctl substitutes there.
var all = []provider{
	{
		name: "capi", binary: "cluster-api-manager", module: capiModule, config: "config",
		args: []string{"--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=false,MachineSetPreflightChecks=true," +
			"MachineWaitForVolumeDetachConsiderVolumeAttachments=true,PriorityQueue=true,ReconcilerRateLimiting=true," +
			"InPlaceUpdates=false,MachineTaintPropagation=false"},
	},
	{
		name: "capi-kubeadm-bootstrap", binary: "kubeadm-bootstrap-manager", module: capiModule, config: "bootstrap/kubeadm/config",
		args: []string{
			"--feature-gates=MachinePool=true,KubeadmBootstrapFormatIgnition=false,PriorityQueue=true,ReconcilerRateLimiting=true",
			"--bootstrap-token-ttl=15m",
		},
	},
	{
		name: "capi-kubeadm-control-plane", binary: "kubeadm-control-plane-manager", module: capiModule, config: "controlplane/kubeadm/config",
		args: []string{"--feature-gates=MachinePool=true,ClusterTopology=false,KubeadmBootstrapFormatIgnition=false,PriorityQueue=true," +
			"ReconcilerRateLimiting=true,InPlaceUpdates=false,MachineTaintPropagation=false"},
	},
	{
		name: "capk", binary: "capk-manager", module: capkModule, config: "config",
		args: []string{"--feature-gates=MachinePool=false"},
	},
}

// Options configure Start.
type Options struct {
	// LogDir receives one log file per manager and is kept. Empty: a temporary
	// directory that Stop removes (print the logs before, see WriteLogs).
	LogDir string
	// Verbosity is the managers' -v; 0 keeps their default (2 for CAPI's).
	Verbosity int
}

// Providers are the running managers.
type Providers struct {
	// LogDir holds <name>.log for every manager.
	LogDir string

	env        *testenv.Env
	dir        string // removed by Stop
	procs      []*childproc.Process
	ports      map[string]int
	caBundle   []byte
	installed  []client.Object // webhook configurations
	conversion []string        // CRDs switched to webhook conversion
}

// Start starts the four managers against env, installs their webhook
// configurations and conversion webhooks, and returns once every webhook server
// answers. On error nothing is left running or installed.
func Start(ctx context.Context, env *testenv.Env, opts Options) (_ *Providers, retErr error) {
	binDir, err := binDir()
	if err != nil {
		return nil, err
	}
	mods, err := moduleDirs(ctx, binDir)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "knest-providers-")
	if err != nil {
		return nil, err
	}
	p := &Providers{env: env, dir: dir, LogDir: opts.LogDir, ports: map[string]int{}}
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("%w\n%s", retErr, p.tails(30))
			_ = p.Stop()
		}
	}()
	if p.LogDir == "" {
		p.LogDir = dir
	} else if err := os.MkdirAll(p.LogDir, 0o755); err != nil {
		return nil, err
	}

	certDir := filepath.Join(dir, "serving-certs")
	if p.caBundle, err = webhook.WriteServingCert(certDir); err != nil {
		return nil, err
	}

	for _, prov := range all {
		args := []string{
			"--leader-elect=false",
			"--diagnostics-address=0",
			"--health-addr=0",
			"--webhook-cert-dir=" + certDir,
		}
		if opts.Verbosity > 0 {
			args = append(args, "--v="+strconv.Itoa(opts.Verbosity))
		}
		args = append(args, prov.args...)
		proc, port, err := p.startWebhookServer(ctx, prov, filepath.Join(binDir, prov.binary), args)
		if err != nil {
			return nil, err
		}
		p.procs = append(p.procs, proc)
		p.ports[prov.name] = port
	}

	for _, prov := range all {
		if err := p.installWebhooks(ctx, prov, mods[prov.module]); err != nil {
			return nil, err
		}
		if err := p.enableConversion(ctx, prov, mods[prov.module]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Err reports the first manager that exited; managers are meant to run until Stop.
func (p *Providers) Err() error {
	return childproc.FirstExit(p.procs)
}

// Stop removes the webhook configurations, returns the CRDs to conversion strategy
// None (so the test bed stays usable), stops the managers and removes the temporary
// directory (with the logs, unless Options.LogDir was set). It is safe to call more
// than once.
func (p *Providers) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, obj := range p.installed {
		errs = append(errs, client.IgnoreNotFound(p.env.Client.Delete(ctx, obj)))
	}
	p.installed = nil
	for _, name := range p.conversion {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Name = name
		patch := []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
		errs = append(errs, client.IgnoreNotFound(p.env.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch))))
	}
	p.conversion = nil
	for _, proc := range p.procs {
		proc.Stop()
	}
	p.procs = nil
	if p.dir != "" {
		errs = append(errs, os.RemoveAll(p.dir))
		p.dir = ""
	}
	return errors.Join(errs...)
}

// WriteLogs writes the last lines of every manager's log to w (all of it for
// lines <= 0), for a test to print on failure.
func (p *Providers) WriteLogs(w io.Writer, lines int) {
	fmt.Fprint(w, p.tails(lines))
}

func (p *Providers) tails(lines int) string {
	names := make([]string, 0, len(all))
	for _, prov := range all {
		names = append(names, prov.name)
	}
	return childproc.LogTails(p.LogDir, lines, names...)
}

// startWebhookServer starts a manager on a free port and waits until its webhook
// server answers. The port is free when chosen but may be taken by another process
// before the manager binds it, so a manager that exits early is retried on another.
func (p *Providers) startWebhookServer(ctx context.Context, prov provider, path string, args []string) (*childproc.Process, int, error) {
	logPath := filepath.Join(p.LogDir, prov.name+".log")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := webhook.FreePort()
		if err != nil {
			return nil, 0, err
		}
		// Every manager reads KUBECONFIG through controller-runtime.
		proc, err := childproc.Start(prov.name, logPath, []string{"KUBECONFIG=" + p.env.KubeconfigPath},
			append([]string{path, "--webhook-port=" + strconv.Itoa(port)}, args...)...)
		if err != nil {
			return nil, 0, err
		}
		if lastErr = webhook.WaitForServer(ctx, proc, port, p.caBundle, startTimeout); lastErr == nil {
			return proc, port, nil
		}
		proc.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, fmt.Errorf("%s (log: %s): %w", prov.name, logPath, lastErr)
}

// installWebhooks installs the webhook configurations of prov's
// config/webhook/manifests.yaml under clusterctl's names (kustomize namePrefix),
// calling the manager directly instead of through its Service.
func (p *Providers) installWebhooks(ctx context.Context, prov provider, modDir string) error {
	path := filepath.Join(modDir, prov.config, "webhook", "manifests.yaml")
	docs, err := webhook.ReadYAMLDocs(path)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		var meta struct{ Kind string }
		if err := json.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := json.Unmarshal(doc, c); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for i := range c.Webhooks {
				if err := webhook.PointAt(&c.Webhooks[i].ClientConfig, p.ports[prov.name], p.caBundle); err != nil {
					return fmt.Errorf("%s: webhook %s: %w", path, c.Webhooks[i].Name, err)
				}
			}
			obj = c
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := json.Unmarshal(doc, c); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for i := range c.Webhooks {
				if err := webhook.PointAt(&c.Webhooks[i].ClientConfig, p.ports[prov.name], p.caBundle); err != nil {
					return fmt.Errorf("%s: webhook %s: %w", path, c.Webhooks[i].Name, err)
				}
			}
			obj = c
		default:
			continue
		}
		obj.SetName(prov.name + "-" + obj.GetName())
		if err := p.env.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("failed to install %s %s: %w", meta.Kind, obj.GetName(), err)
		}
		p.installed = append(p.installed, obj)
	}
	return nil
}

// enableConversion switches the CRDs that prov's config/crd/kustomization.yaml
// patches with a conversion webhook (webhook_in_*.yaml) to that webhook.
func (p *Providers) enableConversion(ctx context.Context, prov provider, modDir string) error {
	crdDir := filepath.Join(modDir, prov.config, "crd")
	patches, err := kustomizePatches(filepath.Join(crdDir, "kustomization.yaml"))
	if err != nil {
		return err
	}
	for _, rel := range patches {
		docs, err := webhook.ReadYAMLDocs(filepath.Join(crdDir, rel))
		if err != nil {
			return err
		}
		for _, doc := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := json.Unmarshal(doc, crd); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			conv := crd.Spec.Conversion
			if crd.Kind != "CustomResourceDefinition" || conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter ||
				conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
				continue
			}
			path := "/convert"
			if s := conv.Webhook.ClientConfig.Service.Path; s != nil {
				path = *s
			}
			want := &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", p.ports[prov.name], path)), CABundle: p.caBundle},
					ConversionReviewVersions: conv.Webhook.ConversionReviewVersions,
				},
			}
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": want}})
			if err != nil {
				return err
			}
			target := &apiextensionsv1.CustomResourceDefinition{}
			target.Name = crd.Name
			// A merge patch: CAPI's CRD migrator may be updating the same CRDs.
			if err := p.env.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return fmt.Errorf("failed to enable the conversion webhook of CRD %s: %w", crd.Name, err)
			}
			p.conversion = append(p.conversion, crd.Name)
		}
	}
	return nil
}

// binDir returns the directory named by EnvProviders, checking that it holds every
// manager. Tests fail, not skip, without them.
func binDir() (string, error) {
	const hint = "run `make providers` and `eval \"$(make -s providers-env)\"` before `go test`"
	dir := os.Getenv(EnvProviders)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: %s", EnvProviders, hint)
	}
	for _, f := range append([]string{"VERSIONS"}, binaries()...) {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%s=%s: %w: %s", EnvProviders, dir, err, hint)
		}
	}
	return dir, nil
}

func binaries() []string {
	var out []string
	for _, p := range all {
		out = append(out, p.binary)
	}
	return out
}

// moduleDirs locates CAPI's and CAPK's modules as knest's go.mod pins them (the
// manifests and CRDs the test bed installs come from there) and checks that the
// managers in binDir were built from the same versions.
func moduleDirs(ctx context.Context, binDir string) (map[string]string, error) {
	// `go test` runs in the package directory, inside knest's module, and puts its
	// own go first in PATH.
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Version}} {{.Dir}}", capiModule, capkModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("failed to locate modules: %w: %s", err, stderr.String())
	}
	built, err := os.ReadFile(filepath.Join(binDir, "VERSIONS"))
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("module %s is not in the module cache: run `go mod download %s`", f[0], f[0])
		}
		if !strings.Contains("\n"+string(built), "\n"+f[0]+" "+f[1]+"\n") {
			return nil, fmt.Errorf("go.mod pins %s %s but the managers in %s were built from:\n%s(update hack/providers.mk and hack/tools/providers)",
				f[0], f[1], binDir, built)
		}
		dirs[f[0]] = f[2]
	}
	return dirs, nil
}
