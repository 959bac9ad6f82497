package cluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

func TestRenderAutoscaledPool(t *testing.T) {
	for _, tt := range []struct {
		name string
		pool knestv1.WorkerPool
		want map[string]string
		// absent are annotations the pool must not carry.
		absent []string
	}{{
		name: "plain, scaling from zero",
		pool: knestv1.WorkerPool{Name: "workers", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 2}},
		want: map[string]string{
			clusterv1.AutoscalerMinSizeAnnotation: "0",
			clusterv1.AutoscalerMaxSizeAnnotation: "2",
			cluster.CapacityCPUAnnotation:         "2",
			cluster.CapacityMemoryAnnotation:      "4Gi",
		},
		absent: []string{cluster.CapacityGPUCountAnnotation, cluster.CapacityGPUTypeAnnotation, cluster.CapacityLabelsAnnotation,
			cluster.CapacityTaintsAnnotation, cluster.CapacityEphemeralDiskAnnotation, cluster.CapacityMaxPodsAnnotation},
	}, {
		name: "GPUs, labels and taints",
		pool: knestv1.WorkerPool{Name: "gpu", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 1, MaxReplicas: 8},
			MachineSpec: knestv1.MachineSpec{CPU: 16, Memory: ptr(resource.MustParse("64Gi")),
				RootDisk: knestv1.RootDiskSpec{Type: knestv1.RootDiskDataVolume, Size: ptr(resource.MustParse("100Gi"))}},
			Labels: map[string]knestv1.LabelValue{"example.com/gpu": "a10", "tier": ""},
			Taints: []knestv1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}},
			GPUs:   []knestv1.DeviceSpec{{Name: "gpu1", DeviceName: "nvidia.com/GA102GL_A10"}, {Name: "gpu2", DeviceName: "nvidia.com/GA102GL_A10"}},
		},
		want: map[string]string{
			clusterv1.AutoscalerMinSizeAnnotation:   "1",
			clusterv1.AutoscalerMaxSizeAnnotation:   "8",
			cluster.CapacityCPUAnnotation:           "16",
			cluster.CapacityMemoryAnnotation:        "64Gi",
			cluster.CapacityEphemeralDiskAnnotation: "100Gi",
			cluster.CapacityGPUCountAnnotation:      "2",
			cluster.CapacityGPUTypeAnnotation:       "nvidia.com/gpu",
			cluster.CapacityLabelsAnnotation:        "example.com/gpu=a10,tier=",
			cluster.CapacityTaintsAnnotation:        "example.com/gpu=true:NoSchedule,dedicated:NoExecute",
		},
	}, {
		name: "GPUs of two vendors",
		pool: knestv1.WorkerPool{Name: "mixed", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 1},
			GPUs: []knestv1.DeviceSpec{{Name: "a", DeviceName: "nvidia.com/A10"}, {Name: "b", DeviceName: "amd.com/MI210"}}},
		want:   map[string]string{cluster.CapacityGPUCountAnnotation: "2"},
		absent: []string{cluster.CapacityGPUTypeAnnotation},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"},
				Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{tt.pool}}}
			cluster.Default(nc)
			g.Expect(nc.Spec.Workers[0].Replicas).To(BeNil(), "an autoscaled pool is not given replicas by defaulting")
			graph, err := cluster.Render(nc, cluster.Options{})
			g.Expect(err).NotTo(HaveOccurred())
			md := graph.Pools[0].MachineDeployment
			g.Expect(md.Spec.Replicas).To(BeNil(), "knest must not set (and so own) an autoscaled pool's replicas")
			for k, v := range tt.want {
				g.Expect(md.Annotations).To(HaveKeyWithValue(k, v))
			}
			for _, k := range tt.absent {
				g.Expect(md.Annotations).NotTo(HaveKey(k))
			}
			// Values the autoscaler parses as quantities must parse.
			for _, k := range []string{cluster.CapacityCPUAnnotation, cluster.CapacityMemoryAnnotation, cluster.CapacityEphemeralDiskAnnotation} {
				if v, ok := md.Annotations[k]; ok {
					_, err := resource.ParseQuantity(v)
					g.Expect(err).NotTo(HaveOccurred(), k)
				}
			}
			hc := graph.Pools[0].HealthCheck
			g.Expect(hc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.IntValue()).To(Equal(max(1, int(tt.pool.Autoscaling.MaxReplicas)*2/5)),
				"remediation is sized for the most nodes the pool can have")
		})
	}
}
