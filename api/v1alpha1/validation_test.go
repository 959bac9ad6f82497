package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
)

// These tests run the CRD's OpenAPI and CEL rules in a real kube-apiserver: the API
// server, not knest's Go code, is what rejects a bad NestedCluster.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func newCluster(name string, mutate func(*knestv1.NestedCluster)) *knestv1.NestedCluster {
	nc := &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{{Name: "workers"}}},
	}
	if mutate != nil {
		mutate(nc)
	}
	return nc
}

func TestInvalidSpecsAreRejected(t *testing.T) {
	qty := resource.MustParse
	tests := []struct {
		name    string
		mutate  func(*knestv1.NestedCluster)
		message string
	}{
		{"even control plane", func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 2 }, "controlPlane.replicas must be 1, 3, 5 or 7"},
		{"control plane of 9", func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 9 }, "controlPlane.replicas must be 1, 3, 5 or 7"},
		{"negative pool", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To(int32(-1)) }, "should be greater than or equal to 0"},
		{"upper-case pool name", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = "GPU" }, "pool name must be a DNS label"},
		{"pool name ending in a dash", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = "gpu-" }, "pool name must be a DNS label"},
		{"pool name too long", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Name = "abcdefghijklmnop" }, "Too long"},
		{"duplicate pool names", func(nc *knestv1.NestedCluster) {
			nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "workers"})
		}, "Duplicate value"},
		{"version without v", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "1.35.4" }, "version must look like v1.MINOR.PATCH"},
		{"version too old", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.29.4" }, "minor from 30 to 36"},
		{"version too new", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.37.0" }, "minor from 30 to 36"},
		{"pod CIDR not a CIDR", func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.243.0.0" }, "network.podCIDR must be an IPv4 CIDR"},
		{"pod CIDR too small", func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.243.0.0/28" }, "network.podCIDR must be an IPv4 CIDR with a prefix from /8 to /24"},
		{"pod CIDR IPv6", func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "fd00::/64" }, "network.podCIDR must be an IPv4 CIDR"},
		{"service CIDR garbage", func(nc *knestv1.NestedCluster) { nc.Spec.Network.ServiceCIDR = "services" }, "network.serviceCIDR must be an IPv4 CIDR"},
		{"overlapping CIDRs", func(nc *knestv1.NestedCluster) {
			nc.Spec.Network.PodCIDR, nc.Spec.Network.ServiceCIDR = "10.0.0.0/8", "10.96.0.0/16"
		}, "network.podCIDR and network.serviceCIDR must not overlap"},
		{"bad DNS domain", func(nc *knestv1.NestedCluster) { nc.Spec.Network.DNSDomain = "Tenant_Local" }, "network.dnsDomain must be a DNS name"},
		{"unknown CNI", func(nc *knestv1.NestedCluster) { nc.Spec.Network.CNI = "calico" }, "Unsupported value: \"calico\""},
		{"unknown service type", func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.ServiceType = "ExternalName" }, "Unsupported value: \"ExternalName\""},
		{"control plane with one CPU", func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.CPU = 1 }, "controlPlane.cpu must be at least 2"},
		{"control plane with 1Gi", func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Memory = ptr.To(qty("1Gi")) }, "controlPlane.memory must be at least 1700Mi"},
		{"worker with 512Mi", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Memory = ptr.To(qty("512Mi")) }, "memory must be at least 1Gi"},
		{"absurd CPU count", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].CPU = 500 }, "should be less than or equal to 128"},
		{"DataVolume without size", func(nc *knestv1.NestedCluster) {
			nc.Spec.Workers[0].RootDisk.Type = knestv1.RootDiskDataVolume
		}, "rootDisk.size is required when rootDisk.type is DataVolume"},
		{"unknown root disk type", func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].RootDisk.Type = "HostDisk" }, "Unsupported value: \"HostDisk\""},
		{"kernel boot without image", func(nc *knestv1.NestedCluster) {
			nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{}
		}, "spec.workers[0].kernelBoot.image"},
		{"negative drain timeout", func(nc *knestv1.NestedCluster) {
			nc.Spec.Workers[0].NodeDrainTimeoutSeconds = ptr.To(int32(-5))
		}, "should be greater than or equal to 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), newCluster("invalid", tt.mutate))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}

	t.Run("name too long", func(t *testing.T) {
		g := NewWithT(t)
		err := env.Client.Create(context.Background(), newCluster("a-name-that-is-longer-than-thirty", nil))
		g.Expect(err).To(MatchError(ContainSubstring("NestedCluster name must be a DNS label of at most 30 characters")))
	})
}

func TestImmutableFieldsAndUpgradeRules(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*knestv1.NestedCluster)
		message string
	}{
		{"pod CIDR", func(nc *knestv1.NestedCluster) { nc.Spec.Network.PodCIDR = "10.244.0.0/16" }, "network.podCIDR cannot be changed after creation"},
		{"service CIDR", func(nc *knestv1.NestedCluster) { nc.Spec.Network.ServiceCIDR = "10.96.0.0/16" }, "network.serviceCIDR cannot be changed after creation"},
		{"DNS domain", func(nc *knestv1.NestedCluster) { nc.Spec.Network.DNSDomain = "other.local" }, "network.dnsDomain cannot be changed after creation"},
		{"CNI", func(nc *knestv1.NestedCluster) { nc.Spec.Network.CNI = knestv1.CNINone }, "network.cni cannot be changed after creation"},
		{"service type", func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.ServiceType = knestv1.ServiceTypeNodePort }, "apiServer.serviceType cannot be changed after creation"},
		{"API host", func(nc *knestv1.NestedCluster) { nc.Spec.APIServer.Host = "api.example.com" }, "apiServer.host cannot be changed"},
		{"control plane 1 to 2", func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 2 }, "controlPlane.replicas must be 1, 3, 5 or 7"},
		{"downgrade", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.32.0" }, "downgrades are not supported"},
		{"skipping a minor", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.34.0" }, "at most one minor at a time"},
		{"storage turned off", func(nc *knestv1.NestedCluster) { nc.Spec.Providers.Storage.Disabled = true }, "providers.storage.disabled cannot change after creation"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := newCluster(fmt.Sprintf("immutable-%d", i), func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.32.4" })
			g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
			defer func() { g.Expect(env.Client.Delete(ctx, nc)).To(Succeed()) }()
			tt.mutate(nc)
			err := env.Client.Update(ctx, nc)
			g.Expect(err).To(MatchError(ContainSubstring(tt.message)))
		})
	}

	t.Run("allowed changes", func(t *testing.T) {
		g := NewWithT(t)
		nc := newCluster("mutable", func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.33.2" })
		g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
		defer func() { g.Expect(env.Client.Delete(ctx, nc)).To(Succeed()) }()
		nc.Spec.Version = "v1.34.3"
		nc.Spec.ControlPlane.Replicas = 3
		nc.Spec.Workers[0].Replicas = ptr.To(int32(0))
		nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To(int32(2))})
		nc.Spec.Providers.LoadBalancer.Disabled = true
		nc.Spec.Providers.Storage.Classes = []knestv1.TenantStorageClass{{Name: "fast", HostStorageClassName: "ssd"}}
		g.Expect(env.Client.Update(ctx, nc)).To(Succeed())
	})
}

// TestServerDefaultsMatchGoDefaults keeps cluster.Default (used without an API
// server, e.g. by --dry-run) in step with the CRD's defaults.
func TestServerDefaultsMatchGoDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nc := newCluster("defaults", func(nc *knestv1.NestedCluster) {
		nc.Spec.Workers[0].KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:" + knestv1.DefaultVersion}
	})
	want := nc.DeepCopy()
	cluster.Default(want)
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	defer func() { g.Expect(env.Client.Delete(ctx, nc)).To(Succeed()) }()

	got := &knestv1.NestedCluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), got)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(got.Spec, want.Spec)).To(BeTrue(), "server: %+v\ngo:     %+v", got.Spec, want.Spec)
}
