package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseSteps(t *testing.T) {
	g := NewWithT(t)
	steps, err := parseSteps("10, 1,5,20,25", 20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(steps).To(Equal([]int{1, 5, 10, 20}), "sorted, ending at n, nothing past it")
	steps, err = parseSteps("", 3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(steps).To(Equal([]int{3}))
	_, err = parseSteps("1,x", 3)
	g.Expect(err).To(MatchError(ContainSubstring(`"x" is not a positive count`)))
	_, err = parseSteps("1", 0)
	g.Expect(err).To(HaveOccurred())
}

func TestSummarize(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Unix(1000, 0)
	t1 := t0.Add(10 * time.Second)
	const mib = 1 << 20
	api := func(ns string) container { return container{ns, "api-0", "kube-apiserver"} }
	s0 := sample{
		nodes: map[string]counter{"n1": {cpu: 100, mem: 1000 * mib, at: t0}},
		containers: map[container]counter{
			api("a"):                            {cpu: 10, at: t0},
			api("b"):                            {cpu: 50, at: t0}, // restarts: its counter goes back
			{"knest-system", "ctrl", "manager"}: {cpu: 1, at: t0},
			{"other", "x", "y"}:                 {cpu: 0, at: t0},
			{"a", "etcd-0", "etcd"}:             {cpu: 5, at: t0},
		},
	}
	s1 := sample{
		nodes: map[string]counter{"n1": {cpu: 105, mem: 2048 * mib, at: t1}},
		containers: map[container]counter{
			api("a"):                            {cpu: 11, mem: 200 * mib, at: t1},
			api("b"):                            {cpu: 2, mem: 100 * mib, at: t1},
			{"c", "api-0", "kube-apiserver"}:    {cpu: 3, mem: 300 * mib, at: t1}, // new: no rate yet
			{"knest-system", "ctrl", "manager"}: {cpu: 1.5, mem: 50 * mib, at: t1},
			{"other", "x", "y"}:                 {cpu: 9, mem: 9 * mib, at: t1},
			{"a", "etcd-0", "etcd"}:             {cpu: 5.2, mem: 40 * mib, at: t1},
		},
	}
	st := stepResult{}
	st.summarize(s0, s1, map[string]bool{"a": true, "b": true, "c": true}, []string{"knest-system"})
	g.Expect(st.HostUse.CPU).To(BeNumerically("~", 0.5, 1e-9))
	g.Expect(st.HostUse.MiB).To(BeNumerically("~", 2048, 1e-9))
	g.Expect(st.TenantUse).To(HaveLen(3))
	g.Expect(st.TenantUse[0].CPU).To(BeNumerically("~", 0.12, 1e-9), "a: its API server and etcd")
	g.Expect(st.TenantUse[0].MiB).To(BeNumerically("~", 240, 1e-9))
	g.Expect(st.TenantUse[1].CPU).To(BeZero(), "b's counter went back: no rate")
	g.Expect(st.TenantUse[2]).To(Equal(usage{CPU: 0, MiB: 300}), "c was not in the first sample")
	g.Expect(st.Components["kube-apiserver"].MiB).To(BeNumerically("~", 200, 1e-9), "the median of 100, 200, 300")
	g.Expect(st.Components["etcd"].CPU).To(BeNumerically("~", 0.02, 1e-9))
	g.Expect(st.Stack["knest-system"].CPU).To(BeNumerically("~", 0.05, 1e-9))
	g.Expect(st.Stack).NotTo(HaveKey("other"))
}

func TestLatencies(t *testing.T) {
	g := NewWithT(t)
	p1 := &prober{failed: 1}
	for i := 1; i <= 99; i++ {
		p1.times = append(p1.times, time.Duration(i)*time.Millisecond)
	}
	p2 := &prober{times: []time.Duration{time.Second}}
	l := latencies([]*prober{p1, p2})
	g.Expect(l).To(Equal(latency{Count: 100, Failed: 1, P50ms: 51, P99ms: 1000, MaxMs: 1000}))
	g.Expect(latencies(nil)).To(Equal(latency{}))
}
