package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// usage is CPU in cores and memory (working set) in MiB.
type usage struct {
	CPU float64 `json:"cpu"`
	MiB float64 `json:"mib"`
}

func (u usage) add(v usage) usage { return usage{CPU: u.CPU + v.CPU, MiB: u.MiB + v.MiB} }

// counter is a cumulative CPU counter (seconds) and a memory gauge (bytes) read at
// the kubelet's own timestamp.
type counter struct {
	cpu, mem float64
	at       time.Time
}

// container identifies a container's figures in a sample.
type container struct{ namespace, pod, name string }

// sample is one scrape of every node's kubelet resource metrics
// (/metrics/resource: the figures the kubelet itself reports for nodes, pods and
// containers, as metrics-server reads them).
type sample struct {
	nodes      map[string]counter
	containers map[container]counter
}

func scrape(ctx context.Context, cs kubernetes.Interface, nodes []string) (sample, error) {
	s := sample{nodes: map[string]counter{}, containers: map[container]counter{}}
	for _, node := range nodes {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics", "resource").DoRaw(ctx)
		if err != nil {
			return s, fmt.Errorf("kubelet metrics of node %s: %w", node, err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			return s, fmt.Errorf("kubelet metrics of node %s: %w", node, err)
		}
		n := s.nodes[node]
		each(families["node_cpu_usage_seconds_total"], func(_ map[string]string, v float64, at time.Time) { n.cpu, n.at = v, at })
		each(families["node_memory_working_set_bytes"], func(_ map[string]string, v float64, _ time.Time) { n.mem = v })
		s.nodes[node] = n
		each(families["container_cpu_usage_seconds_total"], func(l map[string]string, v float64, at time.Time) {
			k := container{l["namespace"], l["pod"], l["container"]}
			c := s.containers[k]
			c.cpu, c.at = v, at
			s.containers[k] = c
		})
		each(families["container_memory_working_set_bytes"], func(l map[string]string, v float64, _ time.Time) {
			k := container{l["namespace"], l["pod"], l["container"]}
			c := s.containers[k]
			c.mem = v
			s.containers[k] = c
		})
	}
	return s, nil
}

func each(f *dto.MetricFamily, fn func(labels map[string]string, v float64, at time.Time)) {
	if f == nil {
		return
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		v := m.GetGauge().GetValue()
		if m.Counter != nil {
			v = m.GetCounter().GetValue()
		}
		fn(labels, v, time.UnixMilli(m.GetTimestampMs()))
	}
}

// rate is the use between two readings: the CPU counter's increase over the time
// between them (zero for a container that restarted or was not in both), and the
// later memory figure.
func rate(a, b counter, ok bool) usage {
	u := usage{MiB: b.mem / (1 << 20)}
	if d := b.at.Sub(a.at).Seconds(); ok && d > 0 && b.cpu >= a.cpu {
		u.CPU = (b.cpu - a.cpu) / d
	}
	return u
}

// containerUse is each container's use between two samples, for the containers in
// the later one.
func containerUse(a, b sample) map[container]usage {
	out := map[container]usage{}
	for k, c := range b.containers {
		prev, ok := a.containers[k]
		out[k] = rate(prev, c, ok)
	}
	return out
}

// capacity is what the host's nodes offer and what their pods' containers request.
type capacity struct {
	Allocatable usage `json:"allocatable"`
	Requested   usage `json:"requested"`
}

// hostCapacity reads the host's capacity and requests, and the container restarts of
// each namespace (a probe that killed a slow container shows there).
func hostCapacity(ctx context.Context, cs kubernetes.Interface) (capacity, map[string]int32, error) {
	var c capacity
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, nil, err
	}
	for _, n := range nodes.Items {
		c.Allocatable = c.Allocatable.add(resources(n.Status.Allocatable))
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, nil, err
	}
	restarts := map[string]int32{}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			restarts[p.Namespace] += st.RestartCount
		}
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ct := range p.Spec.Containers {
			c.Requested = c.Requested.add(resources(ct.Resources.Requests))
		}
		if p.Spec.Overhead != nil {
			c.Requested = c.Requested.add(resources(p.Spec.Overhead))
		}
	}
	return c, restarts, nil
}

func resources(l corev1.ResourceList) usage {
	return usage{CPU: l.Cpu().AsApproximateFloat64(), MiB: l.Memory().AsApproximateFloat64() / (1 << 20)}
}
