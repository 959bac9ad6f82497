// Package manager builds the controller-runtime manager that runs knest's
// controllers: one scheme, one cache configuration, used by `knest controller`,
// the integration tests and the benchmark alike.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/controller/etcdbackup"
	"github.com/knest-dev/knest/internal/controller/etcddisk"
	"github.com/knest-dev/knest/internal/controller/hostedcontrolplane"
	"github.com/knest-dev/knest/internal/controller/jointoken"
	"github.com/knest-dev/knest/internal/controller/nestedcluster"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/netpol"
)

// NewScheme returns a scheme with every API group knest reads or writes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		knestv1.AddToScheme,
		hcpv1.AddToScheme,
		clusterv1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		addonsv1.AddToScheme,
		capkv1.AddToScheme,
		kubevirtv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// What the secure metrics endpoint needs to check its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// `knest controller` reads its own pod for the image that backup Jobs run.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get,namespace=knest-system

// Options configure the manager.
type Options struct {
	Render cluster.Options
	// Concurrency is the number of NestedClusters reconciled in parallel.
	Concurrency int
	// MetricsAddr and HealthAddr are listen addresses; "0" or "" disables them.
	// Metrics are served over HTTPS to callers the host's API server authenticates
	// and authorizes (get on the non-resource URL /metrics).
	MetricsAddr string
	HealthAddr  string
	// LeaderElection lets several replicas run with one active.
	LeaderElection          bool
	LeaderElectionNamespace string
	// ToolImage is the knest image that backup and restore Jobs run, and (unless
	// Render.ProviderImage says otherwise) the tenants' cloud controller managers.
	ToolImage string
	// GuestDNSService is the Service of the tenant VMs' resolver (config/guestdns),
	// read once at start into Render.GuestDNS; empty: the VMs use the host's
	// cluster DNS.
	GuestDNSService client.ObjectKey
}

// New returns a manager with the NestedCluster controller registered.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if opts.ToolImage == "" {
		return nil, errors.New("the knest image that backup Jobs run is not set")
	}
	if opts.Render.ProviderImage == "" {
		// The same image runs `knest etcd` and `knest cloud-controller-manager`.
		opts.Render.ProviderImage = opts.ToolImage
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	if opts.GuestDNSService.Name != "" {
		if opts.Render.GuestDNS, err = guestDNS(cfg, scheme, opts.GuestDNSService); err != nil {
			return nil, err
		}
	}
	// ConfigMaps, VMIs and Machines are everywhere on a host; cache only the ones
	// knest made.
	ownedByKnest, err := labels.NewRequirement(knestv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	clusterLabel, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	ofCluster := labels.NewSelector().Add(*clusterLabel)
	// The controller's own binding in each tenant namespace, and its autoscalers'.
	accessBinding, err := labels.NewRequirement(nestedcluster.AccessBindingLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:    opts.MetricsAddr,
			SecureServing:  true,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
		},
		HealthProbeBindAddress:  opts.HealthAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "knest-controller.knest.dev",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// A replica that stops hands over at once instead of after the lease expires.
		// Safe: the manager returns only once every reconcile has finished.
		LeaderElectionReleaseOnCancel: true,
		// client-go's rate-limited queue, not controller-runtime's priority queue:
		// v0.23.3's can deadlock on shutdown (kubernetes-sigs/controller-runtime#3538,
		// fixed in #3540, not in this line), leaving a worker blocked and the
		// manager waiting out its grace period; a test's manager did so here.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
		// So are Services and workloads: only those of a Cluster API cluster (a
		// hosted control plane's).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}:                  {Label: labels.NewSelector().Add(*ownedByKnest)},
			&kubevirtv1.VirtualMachineInstance{}: {Label: labels.NewSelector().Add(*ownedByKnest)},
			&clusterv1.Machine{}:                 {Label: labels.NewSelector().Add(*ownedByKnest)},
			&rbacv1.RoleBinding{}:                {Label: labels.NewSelector().Add(*accessBinding)},
			&rbacv1.Role{}:                       {Label: ofCluster},
			&corev1.ServiceAccount{}:             {Label: ofCluster},
			&corev1.Service{}:                    {Label: ofCluster},
			&appsv1.Deployment{}:                 {Label: ofCluster},
			&appsv1.StatefulSet{}:                {Label: ofCluster},
			&batchv1.Job{}:                       {Label: ofCluster},
			&batchv1.CronJob{}:                   {Label: ofCluster},
		}},
		// Secrets are read in tenant namespaces only, where the controller's role is
		// bound (see nestedcluster/access.go): a cluster-wide informer would need
		// every Secret of the host.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the controller manager: %w", err)
	}
	self, err := whoAmI(mgr.GetClient())
	if err != nil {
		return nil, err
	}
	r := &nestedcluster.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		// The events.k8s.io recorder changes every event call and the controller's
		// RBAC; until then, core/v1 events, which Cluster API's controllers still write.
		Recorder: mgr.GetEventRecorderFor("knest"), //nolint:staticcheck // see above
		Render:   opts.Render,
		Self:     self,
		Tenants:  &tenant.KubeconfigReader{Reader: mgr.GetAPIReader(), Timeout: 10 * time.Second, Every: 30 * time.Second},
		// Often enough that a control plane that came back blank is reported
		// before anyone acts on it; one GET of kube-system per cluster.
		TenantCheckInterval: time.Minute,
	}
	if err := r.SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: max(opts.Concurrency, 1),
		// Tests and the benchmark build several managers in one process, one after
		// another; controller-runtime would otherwise refuse the second.
		SkipNameValidation: ptr.To(true),
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the NestedCluster controller: %w", err)
	}
	if err := (&hostedcontrolplane.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ToolImage: opts.ToolImage, HostSlowdown: opts.Render.HostSlowdown}).SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: max(opts.Concurrency, 1),
		SkipNameValidation:      ptr.To(true),
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the HostedControlPlane controller: %w", err)
	}
	if err := (&etcddisk.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: max(opts.Concurrency, 1),
		SkipNameValidation:      ptr.To(true),
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the etcd disk controller: %w", err)
	}
	if err := (&etcdbackup.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Image: opts.ToolImage,
		// Asked every 10 s while a restore waits for the tenant's API.
		Tenants: &tenant.KubeconfigReader{Reader: mgr.GetAPIReader(), Timeout: 10 * time.Second, Every: 5 * time.Second},
	}).SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: max(opts.Concurrency, 1),
		SkipNameValidation:      ptr.To(true),
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the etcd backup controller: %w", err)
	}
	if err := (&jointoken.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Timeout: 10 * time.Second}).SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: max(opts.Concurrency, 1),
		SkipNameValidation:      ptr.To(true),
	}); err != nil {
		return nil, fmt.Errorf("failed to set up the join token controller: %w", err)
	}
	if opts.HealthAddr != "" && opts.HealthAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		// Ready once the informers have synced: before that a reconcile would read
		// an empty cache.
		if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
			ctx, cancel := context.WithTimeout(req.Context(), time.Second)
			defer cancel()
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return errors.New("informers have not synced yet")
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// whoAmI is the identity the controller runs as, which it binds its tenant role to.
func whoAmI(c client.Client) (rbacv1.Subject, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return rbacv1.Subject{}, fmt.Errorf("failed to ask the host who the controller is (SelfSubjectReview): %w", err)
	}
	return nestedcluster.SubjectFor(review.Status.UserInfo.Username), nil
}

// guestDNS reads the tenant VMs' resolver from its Service. Read once: its address
// does not change while the Service exists, and the controller caches no Services
// but those of tenants.
func guestDNS(cfg *rest.Config, scheme *runtime.Scheme, key client.ObjectKey) (*netpol.GuestDNS, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	svc := &corev1.Service{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Get(ctx, key, svc); err != nil {
		return nil, fmt.Errorf("failed to read the tenant VMs' DNS Service %s (--guest-dns-service; config/guestdns makes it): %w", key, err)
	}
	return netpol.GuestDNSFromService(svc)
}
