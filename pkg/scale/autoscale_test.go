package scale

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
)

func bounds(lo, hi int32) *knestv1.PoolAutoscaling {
	return &knestv1.PoolAutoscaling{MinReplicas: lo, MaxReplicas: hi}
}

func autoPool(name string, lo, hi int32) knestv1.WorkerPool {
	return knestv1.WorkerPool{Name: name, Autoscaling: bounds(lo, hi)}
}

func TestParseAutoscale(t *testing.T) {
	tests := []struct {
		in       []string
		want     map[string]*knestv1.PoolAutoscaling
		errMatch string
	}{
		{in: nil, want: map[string]*knestv1.PoolAutoscaling{}},
		{in: []string{"gpu=0:4", "workers=1:3"}, want: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4), "workers": bounds(1, 3)}},
		{in: []string{"1:5"}, want: map[string]*knestv1.PoolAutoscaling{"": bounds(1, 5)}},
		{in: []string{"gpu=off"}, want: map[string]*knestv1.PoolAutoscaling{"gpu": nil}},
		{in: []string{"gpu=OFF", "off"}, want: map[string]*knestv1.PoolAutoscaling{"gpu": nil, "": nil}},
		{in: []string{"gpu=2:2"}, want: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(2, 2)}},
		{in: []string{"gpu="}, errMatch: "must look like POOL=MIN:MAX or POOL=off"},
		{in: []string{"=0:4"}, errMatch: "needs a pool name"},
		{in: []string{"gpu=4"}, errMatch: "the bounds must be MIN:MAX"},
		{in: []string{"gpu=a:b"}, errMatch: "whole numbers"},
		{in: []string{"gpu=3:2"}, errMatch: "the minimum (3) must be at most the maximum (2)"},
		{in: []string{"gpu=0:0"}, errMatch: "the maximum must be from 1 to 200"},
		{in: []string{"gpu=0:201"}, errMatch: "the maximum must be from 1 to 200"},
		{in: []string{"gpu=-1:2"}, errMatch: "the minimum must be from 0 to 200"},
		{in: []string{"GPU=0:2"}, errMatch: "must be a DNS label"},
		{in: []string{"gpu=0:2", "gpu=off"}, errMatch: "given twice"},
		{in: []string{"0:2", "1:3"}, errMatch: "given twice"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		got, err := ParseAutoscale(tt.in)
		if tt.errMatch != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tt.errMatch)), "input %v", tt.in)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "input %v", tt.in)
		g.Expect(got).To(Equal(tt.want), "input %v", tt.in)
	}
}

func TestApplyAutoscale(t *testing.T) {
	tests := []struct {
		name     string
		spec     knestv1.NestedClusterSpec
		req      Request
		want     []knestv1.WorkerPool
		changes  []Change
		errMatch string
	}{{
		name:    "autoscale a pool",
		spec:    spec(1, pool("workers", 2), pool("gpu", 0)),
		req:     Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}},
		want:    []knestv1.WorkerPool{pool("workers", 2), autoPool("gpu", 0, 4)},
		changes: []Change{{Pool: "gpu", From: 0, ToAuto: bounds(0, 4)}},
	}, {
		name:    "autoscale the default pool by a bare MIN:MAX",
		spec:    spec(1, pool("workers", 2)),
		req:     Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"": bounds(1, 5)}},
		want:    []knestv1.WorkerPool{autoPool("workers", 1, 5)},
		changes: []Change{{Pool: "workers", From: 2, ToAuto: bounds(1, 5)}},
	}, {
		name:    "change the bounds",
		spec:    spec(1, autoPool("gpu", 0, 4)),
		req:     Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(1, 8)}},
		want:    []knestv1.WorkerPool{autoPool("gpu", 1, 8)},
		changes: []Change{{Pool: "gpu", FromAuto: bounds(0, 4), ToAuto: bounds(1, 8)}},
	}, {
		name: "same bounds",
		spec: spec(1, autoPool("gpu", 0, 4)),
		req:  Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}},
		want: []knestv1.WorkerPool{autoPool("gpu", 0, 4)},
	}, {
		name:    "off with a size",
		spec:    spec(1, autoPool("gpu", 0, 4)),
		req:     Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}, Pools: map[string]int32{"gpu": 2}},
		want:    []knestv1.WorkerPool{pool("gpu", 2)},
		changes: []Change{{Pool: "gpu", FromAuto: bounds(0, 4), To: 2}},
	}, {
		name:     "off without a size",
		spec:     spec(1, autoPool("gpu", 0, 4)),
		req:      Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}},
		errMatch: "turning autoscaling off needs the size it keeps: add --pool gpu=N",
	}, {
		name: "off on a pool not autoscaled",
		spec: spec(1, pool("gpu", 1)),
		req:  Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}},
		want: []knestv1.WorkerPool{pool("gpu", 1)},
	}, {
		name:     "size an autoscaled pool",
		spec:     spec(1, pool("workers", 2), autoPool("gpu", 0, 4)),
		req:      Request{Pools: map[string]int32{"gpu": 3}},
		errMatch: "pool gpu is autoscaled (0 to 4 nodes): the autoscaler sets its size; change its bounds with --autoscale gpu=MIN:MAX, or turn autoscaling off and size it yourself with --autoscale gpu=off --pool gpu=N",
	}, {
		name:     "size the autoscaled default pool",
		spec:     spec(1, autoPool("workers", 1, 3)),
		req:      Request{Workers: ptr.To[int32](2)},
		errMatch: "pool workers is autoscaled",
	}, {
		name:     "bounds and a size at once",
		spec:     spec(1, pool("gpu", 1)),
		req:      Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}, Pools: map[string]int32{"gpu": 3}},
		errMatch: "pool gpu is autoscaled",
	}, {
		name:     "autoscale an unknown pool",
		spec:     spec(1, pool("workers", 1)),
		req:      Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}},
		errMatch: `the cluster has no worker pool "gpu"; its pools are workers`,
	}, {
		name:     "autoscale a held pool",
		spec:     heldSpec(held(pool("gpu", 1), "v1.34.4")),
		req:      Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}},
		errMatch: "pool gpu is held at v1.34.4 and the control plane runs v1.35.4: the autoscaler could add no node to it",
	}, {
		name:    "autoscale a pool held at an older patch",
		spec:    heldSpec(held(pool("gpu", 1), "v1.35.3")),
		req:     Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 4)}},
		want:    []knestv1.WorkerPool{held(autoPool("gpu", 0, 4), "v1.35.3")},
		changes: []Change{{Pool: "gpu", From: 1, ToAuto: bounds(0, 4)}},
	}, {
		name:     "bounds out of range",
		spec:     spec(1, pool("gpu", 1)),
		req:      Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": bounds(0, 300)}},
		errMatch: "autoscaling of gpu: the maximum must be from 1 to 200",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := tt.spec.DeepCopy()
			plan, err := Apply(tt.spec, tt.req, nil)
			g.Expect(tt.spec).To(Equal(*before), "Apply must not modify its input")
			if tt.errMatch != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.errMatch)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(plan.Spec.Workers).To(Equal(tt.want))
			g.Expect(plan.Changes).To(Equal(tt.changes))
		})
	}
}

func TestChangeString(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Change{Pool: "gpu", From: 1, ToAuto: bounds(0, 4)}.String()).To(Equal("pool gpu 1 -> auto 0-4"))
	g.Expect(Change{Pool: "gpu", FromAuto: bounds(0, 4), ToAuto: bounds(1, 8)}.String()).To(Equal("pool gpu auto 0-4 -> auto 1-8"))
	g.Expect(Change{Pool: "gpu", FromAuto: bounds(0, 4), To: 3}.String()).To(Equal("pool gpu auto 0-4 -> 3"))
	g.Expect(Change{Pool: "gpu", From: 1, To: 3}.String()).To(Equal("pool gpu 1 -> 3"))
}

func TestWithCurrentSizes(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{Spec: spec(1, pool("workers", 2), autoPool("gpu", 0, 4), autoPool("burst", 1, 9))}
	nc.Status.Workers = []knestv1.PoolStatus{
		{Name: "gpu", Autoscaling: bounds(0, 4), ReplicaStatus: knestv1.ReplicaStatus{Desired: 3}},
	}
	req := Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil, "burst": nil}}
	got := WithCurrentSizes(req, nc)
	g.Expect(got.Pools).To(Equal(map[string]int32{"gpu": 3, "burst": 1}),
		"a pool keeps the size the autoscaler set, or its minimum while none is reported")
	g.Expect(req.Pools).To(BeNil(), "the request given is not modified")

	sized := Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}, Pools: map[string]int32{"gpu": 1}}
	g.Expect(WithCurrentSizes(sized, nc).Pools).To(Equal(map[string]int32{"gpu": 1}), "a size given wins")

	plan, err := Apply(nc.Spec, WithCurrentSizes(Request{Autoscale: map[string]*knestv1.PoolAutoscaling{"gpu": nil}}, nc), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Spec.Workers[1]).To(Equal(pool("gpu", 3)))
}

func TestPendingAutoscaledPool(t *testing.T) {
	g := NewWithT(t)
	nc := readyCluster()
	nc.Spec.Workers = append(nc.Spec.Workers, autoPool("burst", 0, 5))
	g.Expect(Pending(nc)).To(ConsistOf("pool burst: the controller has not yet reported the size the autoscaler set"))

	nc.Status.Workers = append(nc.Status.Workers, knestv1.PoolStatus{Name: "burst", Autoscaling: bounds(0, 5), ReplicaStatus: knestv1.ReplicaStatus{Desired: 2, Ready: 1, Current: 2}})
	g.Expect(Pending(nc)).To(ConsistOf("pool burst 1/2 ready"), "the autoscaler's size is the one to reach, not 1")

	nc.Status.Workers[1].Ready = 2
	g.Expect(Pending(nc)).To(BeEmpty())

	nc.Status.Workers[1].ReplicaStatus = knestv1.ReplicaStatus{}
	g.Expect(Pending(nc)).To(BeEmpty(), "an autoscaled pool at zero nodes is where it should be")
}
