package knest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/internal/cli"
	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/upgrade"
	"github.com/knest-dev/knest/pkg/validation"
)

// DefaultMachineInterval is how often an upgrade's wait lists the cluster's Machines
// to report each one Cluster API adds, readies and removes.
const DefaultMachineInterval = 2 * time.Second

type upgradeOptions struct {
	wait            time.Duration
	machineInterval time.Duration
}

// UpgradeOption configures Upgrade.
type UpgradeOption func(*upgradeOptions)

// UpgradeWithWait waits up to timeout for every machine to run its new version and the
// cluster to be ready; 0 returns once the change is stored.
func UpgradeWithWait(timeout time.Duration) UpgradeOption {
	return func(o *upgradeOptions) { o.wait = timeout }
}

// UpgradeWithMachineInterval sets how often the wait lists Machines (default
// DefaultMachineInterval).
func UpgradeWithMachineInterval(d time.Duration) UpgradeOption {
	return func(o *upgradeOptions) { o.machineInterval = d }
}

// Upgrade moves the NestedCluster to req.Version, holding or releasing the pools req
// names. It refuses, before patching, what the API server would refuse, with the
// same message (validation.Update: downgrades, skipping a minor, a held pool outside
// kubelet's skew), a request that changes nothing, and a version the host publishes
// no node image for (kubever.NodeVersionsConfigMap). It patches the spec with an
// optimistic lock, retried on conflict, and returns the plan it applied. With a wait
// it reports each Machine Cluster API adds, readies and removes until the cluster is
// ready at its new generation.
func (c *Client) Upgrade(ctx context.Context, key client.ObjectKey, req upgrade.Request, opts ...UpgradeOption) (upgrade.Plan, error) {
	o := upgradeOptions{machineInterval: DefaultMachineInterval}
	for _, opt := range opts {
		opt(&o)
	}
	if err := req.Validate(); err != nil {
		return upgrade.Plan{}, err
	}
	status := cli.StatusForLogger(c.logger)
	images, err := c.nodeImageVersions(ctx)
	if err != nil {
		return upgrade.Plan{}, err
	}

	started := time.Now()
	var follow *machineFollower
	if o.wait > 0 {
		// The machines before the change, so that only what Cluster API does to
		// them from now on is reported.
		follow = c.newMachineFollower(ctx, key, started, status)
	}

	var plan upgrade.Plan
	var old *knestv1.NestedCluster
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc := &knestv1.NestedCluster{}
		if err := c.c.Get(ctx, key, nc); err != nil {
			return notFoundOr(err, key, "failed to get cluster %s in namespace %s")
		}
		if nc.DeletionTimestamp != nil {
			return fmt.Errorf("cannot upgrade cluster %s: it is being deleted", key.Name)
		}
		var err error
		if plan, err = upgrade.Apply(nc, req); err != nil {
			return fmt.Errorf("cannot upgrade cluster %s: %w", key.Name, err)
		}
		if plan.Empty() {
			return nothingToUpgrade(nc, req)
		}
		updated := nc.DeepCopy()
		updated.Spec = plan.Spec
		if errs := validation.Update(nc, updated); len(errs) > 0 {
			msgs := make([]string, 0, len(errs))
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			return cannotUpgrade(key.Name, msgs)
		}
		if err := checkNodeImages(plan, images); err != nil {
			return fmt.Errorf("cannot upgrade cluster %s: %w", key.Name, err)
		}
		old = nc.DeepCopy()
		if err := c.c.Patch(ctx, updated, client.MergeFromWithOptions(nc, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("failed to upgrade cluster %s: %w", key.Name, err)
		}
		return nil
	})
	if err != nil {
		return upgrade.Plan{}, err
	}

	changes := plan.Changes()
	status.Success(fmt.Sprintf("cluster %s upgrading: %s", key.Name, strings.Join(changes, ", ")))
	for _, h := range plan.StillHeld {
		if slices.Contains(req.HoldPools, h.Pool) {
			status.Note(fmt.Sprintf("pool %s stays held at %s, as it was", h.Pool, h.Version))
			continue
		}
		status.Note(fmt.Sprintf("pool %s stays held at %s; to let it follow: knest upgrade %s -n %s --version %s --release-pool %s",
			h.Pool, h.Version, key.Name, key.Namespace, plan.To, h.Pool))
	}
	if running := old.Status.Version; running != "" && running != plan.From && plan.From != plan.To {
		status.Note(fmt.Sprintf("the control plane still rolls from %s to %s; Cluster API starts on %s once every machine runs %s (upgrades do not stack)",
			running, plan.From, plan.To, plan.From))
	}
	if o.wait <= 0 {
		return plan, nil
	}

	waitOpts := []WaitOption{WaitWithTimeout(o.wait), func(w *waitOptions) {
		w.noParts = true
		w.pending = versionsPending
	}}
	if follow != nil {
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			follow.run(fctx, o.machineInterval)
		}()
		defer func() { stop(); <-done }()
		waitOpts = append(waitOpts, func(w *waitOptions) {
			// Report what happened since the last listing before "ready".
			w.beforeReady = func() { stop(); <-done; follow.observe(ctx) }
		})
	}
	if err := c.Wait(ctx, key, waitOpts...); err != nil {
		return plan, fmt.Errorf("%w\n%s", err, c.upgradeLeftBehind(ctx, key, plan, follow))
	}
	return plan, nil
}

// nothingToUpgrade is the error for a request that changes nothing.
func nothingToUpgrade(nc *knestv1.NestedCluster, req upgrade.Request) error {
	msg := fmt.Sprintf("cluster %s already asks for %s", nc.Name, nc.Spec.Version)
	if len(req.HoldPools) > 0 {
		msg += " and its named pools are held where they are"
	}
	msg += "; nothing to upgrade"
	if running := nc.Status.Version; running != "" && running != nc.Spec.Version {
		msg += fmt.Sprintf(" (its control plane still rolls from %s; follow it with knest get %s -n %s)", running, nc.Name, nc.Namespace)
	}
	return errors.New(msg)
}

func cannotUpgrade(name string, problems []string) error {
	if len(problems) == 1 {
		return fmt.Errorf("cannot upgrade cluster %s: %s", name, problems[0])
	}
	return fmt.Errorf("cannot upgrade cluster %s:\n  - %s", name, strings.Join(problems, "\n  - "))
}

// nodeImageVersions reads the versions the host publishes node images for
// (kubever.NodeVersionsConfigMap). It returns nil when the host publishes none or the
// list cannot be read for lack of permission: then every version is allowed, and the
// controller's admission policy still has the last word.
func (c *Client) nodeImageVersions(ctx context.Context) ([]string, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: kubever.NodeVersionsNamespace, Name: kubever.NodeVersionsConfigMap}
	err := c.c.Get(ctx, key, cm)
	switch {
	case apierrors.IsNotFound(err):
		c.logger.V(1).Info(fmt.Sprintf("The host publishes no node image versions (no ConfigMap %s); not checking the version against them", key))
		return nil, nil
	case apierrors.IsForbidden(err):
		c.logger.V(1).Info(fmt.Sprintf("Cannot read the host's node image versions (ConfigMap %s); not checking the version against them", key), "error", err.Error())
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to read the host's node image versions (ConfigMap %s): %w", key, err)
	}
	raw, ok := cm.Data[kubever.NodeVersionsKey]
	if !ok {
		c.logger.V(1).Info(fmt.Sprintf("ConfigMap %s has no key %q; not checking the version against node images", key, kubever.NodeVersionsKey))
		return nil, nil
	}
	versions := kubever.ParseNodeVersions(raw)
	c.logger.V(1).Info("Node images on this host", "versions", strings.Join(versions, " "))
	if versions == nil {
		versions = []string{}
	}
	return versions, nil
}

// checkNodeImages refuses a plan whose version, or a held pool's, has no node image;
// known nil means the host publishes no list.
func checkNodeImages(plan upgrade.Plan, known []string) error {
	if known == nil {
		return nil
	}
	if !kubever.HasNodeImage(known, plan.To) {
		return errors.New(kubever.NoNodeImageMessage(plan.To, known))
	}
	for _, h := range append(slices.Clone(plan.Held), plan.StillHeld...) {
		if !kubever.HasNodeImage(known, h.Version) {
			return fmt.Errorf("pool %s is held at %s: %s", h.Pool, h.Version, kubever.NoNodeImageMessage(h.Version, known))
		}
	}
	return nil
}

// versionsPending lists what of an upgrade the status does not show done yet:
// the control plane or a pool not at the version the spec asks for, or machines not
// up to date. The Ready condition covers this too; this keeps a wait from ending on
// a status written before Cluster API took up the new version.
func versionsPending(nc *knestv1.NestedCluster) []string {
	var out []string
	st := nc.Status
	if st.Version != "" && st.Version != nc.Spec.Version {
		out = append(out, fmt.Sprintf("control plane at %s, not yet %s", st.Version, nc.Spec.Version))
	}
	if cp := st.ControlPlane; cp.UpToDate < cp.Current {
		out = append(out, fmt.Sprintf("control plane %d of %d machines up to date", cp.UpToDate, cp.Current))
	}
	for _, p := range st.Workers {
		want := upgrade.WantVersion(nc, p.Name)
		if p.Version != "" && want != "" && p.Version != want {
			out = append(out, fmt.Sprintf("pool %s at %s, not yet %s", p.Name, p.Version, want))
		}
		if p.UpToDate < p.Current {
			out = append(out, fmt.Sprintf("pool %s %d of %d machines up to date", p.Name, p.UpToDate, p.Current))
		}
	}
	return out
}

// upgradeLeftBehind says, after a wait that ended early, what stays and how to go on.
func (c *Client) upgradeLeftBehind(ctx context.Context, key client.ObjectKey, plan upgrade.Plan, follow *machineFollower) string {
	msg := fmt.Sprintf("The upgrade (%s) stays in the cluster's spec and Cluster API goes on replacing its machines", strings.Join(plan.Changes(), ", "))
	if follow != nil {
		nc := &knestv1.NestedCluster{}
		if err := c.c.Get(ctx, key, nc); err == nil {
			if behind := follow.behind(nc); len(behind) > 0 {
				msg += "; not yet rebuilt: " + strings.Join(behind, ", ")
			}
		}
	}
	return msg + fmt.Sprintf(". Follow it with `knest get %s -n %s`; nodes cannot be downgraded, so there is no undo.", key.Name, key.Namespace)
}

// NodeVersions lists the cluster's Machines (the control plane first, then pools in
// spec order) with their node and the kubelet version it reports.
func (c *Client) NodeVersions(ctx context.Context, key client.ObjectKey) ([]upgrade.Machine, error) {
	nc, err := c.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	machines, err := c.upgradeMachines(ctx, key)
	if err != nil {
		return nil, err
	}
	upgrade.Sort(machines, poolNames(nc))
	return machines, nil
}

func (c *Client) upgradeMachines(ctx context.Context, key client.ObjectKey) ([]upgrade.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := c.c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the machines of cluster %s: %w", key.Name, err)
	}
	out := make([]upgrade.Machine, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, upgrade.MachineFrom(&list.Items[i], key.Name))
	}
	return out, nil
}

func poolNames(nc *knestv1.NestedCluster) []string {
	out := make([]string, 0, len(nc.Spec.Workers))
	for _, p := range nc.Spec.Workers {
		out = append(out, p.Name)
	}
	return out
}

// machineFollower lists a cluster's Machines and prints each step of each one once.
type machineFollower struct {
	c       *Client
	key     client.ObjectKey
	status  *cli.Status
	mu      sync.Mutex
	tracker *upgrade.Tracker
}

// newMachineFollower starts from the Machines listed now. It returns nil, and the
// wait reports no machines, when they cannot be listed.
func (c *Client) newMachineFollower(ctx context.Context, key client.ObjectKey, started time.Time, status *cli.Status) *machineFollower {
	nc := &knestv1.NestedCluster{}
	if err := c.c.Get(ctx, key, nc); err != nil {
		return nil // Upgrade reports the error
	}
	machines, err := c.upgradeMachines(ctx, key)
	if err != nil {
		c.logger.V(1).Info("Cannot follow the cluster's machines; waiting for the cluster only", "error", err.Error())
		return nil
	}
	return &machineFollower{c: c, key: key, status: status,
		tracker: upgrade.NewTracker(started, machines, poolNames(nc))}
}

func (f *machineFollower) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.observe(ctx)
		}
	}
}

func (f *machineFollower) observe(ctx context.Context) {
	machines, err := f.c.upgradeMachines(ctx, f.key)
	if err != nil {
		if ctx.Err() == nil {
			f.c.logger.V(1).Info("Failed to list machines, retrying", "error", err.Error())
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.tracker.Observe(machines, time.Now()) {
		f.status.Success(e.String())
	}
}

// behind names the machines last seen not yet at the version nc asks for.
func (f *machineFollower) behind(nc *knestv1.NestedCluster) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.tracker.Behind(nc) {
		out = append(out, fmt.Sprintf("%s %s (%s)", upgrade.PoolTitle(m.Pool), m.Name, m.Version))
	}
	return out
}
