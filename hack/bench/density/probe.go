package main

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// prober times GETs of one object (the namespace kube-system) from one tenant's API
// server: a read that goes through authentication, authorization and etcd's quorum
// read, as most of a tenant's API traffic does.
type prober struct {
	cs     kubernetes.Interface
	mu     sync.Mutex
	times  []time.Duration
	failed int
}

func (p *prober) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		start := time.Now()
		_, err := p.cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		d := time.Since(start)
		if err != nil && ctx.Err() != nil {
			return // cut off by the window's end: neither a sample nor a failure
		}
		p.mu.Lock()
		if err != nil {
			p.failed++
		} else {
			p.times = append(p.times, d)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// latency is the distribution of every tenant's GETs over a window.
type latency struct {
	Count  int     `json:"count"`
	Failed int     `json:"failed"`
	P50ms  float64 `json:"p50ms"`
	P99ms  float64 `json:"p99ms"`
	MaxMs  float64 `json:"maxms"`
}

func latencies(ps []*prober) latency {
	var all []time.Duration
	l := latency{}
	for _, p := range ps {
		all = append(all, p.times...)
		l.Failed += p.failed
	}
	l.Count = len(all)
	if len(all) == 0 {
		return l
	}
	slices.Sort(all)
	ms := func(q float64) float64 {
		return float64(all[min(len(all)-1, int(q*float64(len(all))))].Microseconds()) / 1000
	}
	l.P50ms, l.P99ms, l.MaxMs = ms(0.5), ms(0.99), ms(1)
	return l
}
