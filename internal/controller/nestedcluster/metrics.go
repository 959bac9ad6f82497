package nestedcluster

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

// knest's own metrics, served with controller-runtime's on the manager's metrics
// endpoint.
var (
	clustersByPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "knest_nestedclusters",
		Help: "NestedClusters by phase, as this controller last reconciled them.",
	}, []string{"phase"})
	timeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "knest_nestedcluster_time_to_ready_seconds",
		Help:    "Seconds from a NestedCluster's creation to its first Running phase.",
		Buckets: prometheus.ExponentialBuckets(30, 2, 10), // 30 s to about 4 h
	})
	applyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "knest_apply_errors_total",
		Help: "Reconciles that failed to bring the Cluster API objects in line with the spec, by whether retrying can help.",
	}, []string{"terminal"})
)

func init() {
	metrics.Registry.MustRegister(clustersByPhase, timeToReady, applyErrors)
}

// phases remembers each cluster's last phase, so the gauge counts each once.
var phases = struct {
	sync.Mutex
	byCluster map[types.NamespacedName]knestv1.Phase
}{byCluster: map[types.NamespacedName]knestv1.Phase{}}

// recordMetrics updates the metrics after a reconcile of nc.
func recordMetrics(nc *knestv1.NestedCluster, previous knestv1.Phase, s *scope, applyErr error) {
	setPhase(types.NamespacedName{Namespace: nc.Namespace, Name: nc.Name}, nc.Status.Phase)
	if nc.Status.Phase == knestv1.PhaseRunning && previous == knestv1.PhaseProvisioning {
		timeToReady.Observe(time.Since(nc.CreationTimestamp.Time).Seconds())
	}
	if applyErr != nil {
		terminal := "false"
		if failed(s, applyErr) {
			terminal = "true"
		}
		applyErrors.WithLabelValues(terminal).Inc()
	}
}

// setPhase records a cluster's phase; "" forgets a cluster that is gone.
func setPhase(key types.NamespacedName, phase knestv1.Phase) {
	phases.Lock()
	if phase == "" {
		delete(phases.byCluster, key)
	} else {
		phases.byCluster[key] = phase
	}
	counts := map[knestv1.Phase]float64{}
	for _, p := range phases.byCluster {
		counts[p]++
	}
	phases.Unlock()
	for _, p := range []knestv1.Phase{knestv1.PhaseProvisioning, knestv1.PhaseRunning, knestv1.PhaseScaling,
		knestv1.PhaseUpgrading, knestv1.PhaseDeleting, knestv1.PhaseFailed, knestv1.PhasePaused} {
		clustersByPhase.WithLabelValues(string(p)).Set(counts[p])
	}
}
