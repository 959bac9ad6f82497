package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type table struct {
	header []string
	rows   [][]string
}

type section struct {
	heading string
	notes   []string
	tables  []table
}

type report struct {
	intro    []string
	sections []section
}

// stats is the median, minimum and maximum over runs.
type stats struct{ med, min, max float64 }

func statsOf(vs []float64) stats {
	if len(vs) == 0 {
		return stats{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{med: med, min: s[0], max: s[len(s)-1]}
}

// metric is one row of the summary table.
type metric struct {
	name   string
	unit   string
	digits int
	value  func(*runResult) float64
	// target, if set, is the limit and whether the median meets it.
	target func(n int) (string, func(float64) bool)
}

func atMost(limit float64, unit string) func(int) (string, func(float64) bool) {
	return func(int) (string, func(float64) bool) {
		return fmt.Sprintf("≤ %g%s", limit, unit), func(v float64) bool { return v <= limit }
	}
}

var metrics = []metric{
	{name: "Converged (last controller write after the first create)", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.ConvergedSeconds },
		target: func(n int) (string, func(float64) bool) {
			if n != 100 {
				return "(≤ 10 s is for 100)", nil
			}
			return "≤ 10 s", func(v float64) bool { return v <= 10 }
		}},
	{name: "  same, not counting Event writes", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.ConvergedNoEventsSeconds }},
	{name: "  every graph object exists (first poll that saw it)", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.GraphSeconds }},
	{name: "  and every status.observedGeneration is current", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.StatusSeconds }},
	{name: "Controller writes per cluster (create)", digits: 3,
		value:  func(r *runResult) float64 { return float64(r.CreateWrites) / float64(r.N) },
		target: atMost(15, "")},
	{name: "  failed writes (status >= 400), total", digits: 0,
		value: func(r *runResult) float64 { return float64(r.CreateFailures) }},
	{name: "Controller writes per minute at rest", digits: 1,
		value: func(r *runResult) float64 { return float64(r.RestWrites) / (r.RestSeconds / 60) },
		target: func(int) (string, func(float64) bool) {
			return "0", func(v float64) bool { return v == 0 }
		}},
	{name: "Go heap in use after GC, after the rest period", unit: " MiB", digits: 1,
		value:  func(r *runResult) float64 { return r.End.HeapInuseMiB },
		target: atMost(150, " MiB")},
	{name: "  same, just before the first create", unit: " MiB", digits: 1,
		value: func(r *runResult) float64 { return r.Baseline.HeapInuseMiB }},
	{name: "  peak heap in use, sampled every 100 ms (garbage included)", unit: " MiB", digits: 1,
		value: func(r *runResult) float64 { return r.End.PeakHeapMiB }},
	{name: "Peak RSS (VmHWM) from just before the first create", unit: " MiB", digits: 1,
		value:  func(r *runResult) float64 { return r.End.PeakRSSMiB },
		target: atMost(150, " MiB")},
	{name: "  RSS just before the first create", unit: " MiB", digits: 1,
		value: func(r *runResult) float64 { return r.Baseline.RSSMiB }},
	{name: "Reconciles per cluster", digits: 2,
		value: func(r *runResult) float64 { return float64(r.Reconciles) / float64(r.N) }},
	{name: "Reconcile errors, total", digits: 0,
		value: func(r *runResult) float64 { return float64(r.ReconcileErrors) }},
	{name: "Mean reconcile duration", unit: " ms", digits: 1,
		value: func(r *runResult) float64 { return r.ReconcileMeanMs }},
	{name: "Mean wait in the work queue", unit: " ms", digits: 1,
		value: func(r *runResult) float64 { return r.QueueWaitMeanMs }},
	{name: "Creating the NestedClusters (benchmark client)", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.CreateSeconds }},
	{name: "Test bed start", unit: "s", digits: 1,
		value: func(r *runResult) float64 { return r.TestenvStartSeconds }},
}

func buildReport(o options, m machine, results map[int][]*runResult, failures []string) *report {
	rep := &report{intro: []string{
		fmt.Sprintf("Date: %s", time.Now().UTC().Format("2006-01-02 15:04 UTC")),
		fmt.Sprintf("Command: %s", strings.Join(append([]string{"bench"}, o.args...), " ")),
		fmt.Sprintf("Machine: %d CPUs (%s), %s RAM, Linux %s, %s", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go),
		fmt.Sprintf("Settings: %s; idle = no controller write for %s; at rest measured for %s", describeSettings(o), o.idle, o.rest),
		"Each run: fresh child process, fresh etcd + kube-apiserver + kube-controller-manager, N NestedClusters with one worker pool created at once.",
	}}
	if o.separate {
		rep.intro = append(rep.intro, "Memory figures are of the controller's own process (manager.New with the counting transport, nothing else).")
	} else {
		rep.intro = append(rep.intro, "Memory figures are of the benchmark process, which besides the controller holds the test bed's CRDs and the benchmark's own clients (see the rows \"just before the first create\"; -controller-process measures the controller alone).")
	}
	for _, f := range failures {
		rep.intro = append(rep.intro, "FAILED: "+f)
	}
	for _, n := range o.sizes {
		runs := results[n]
		sec := section{heading: fmt.Sprintf("N = %d NestedClusters (%d runs)", n, len(runs))}
		if len(runs) == 0 {
			sec.notes = append(sec.notes, "No run succeeded.")
			rep.sections = append(rep.sections, sec)
			continue
		}
		summary := table{header: []string{"Metric", "Median", "Min", "Max", "Target", ""}}
		for _, mt := range metrics {
			var vs []float64
			for _, r := range runs {
				vs = append(vs, mt.value(r))
			}
			st := statsOf(vs)
			targetText, verdict := "", ""
			if mt.target != nil {
				var ok func(float64) bool
				targetText, ok = mt.target(n)
				if ok != nil {
					verdict = "met"
					if !ok(st.med) {
						verdict = "MISSED"
					}
				}
			}
			summary.rows = append(summary.rows, []string{mt.name,
				format(st.med, mt.digits, mt.unit), format(st.min, mt.digits, mt.unit), format(st.max, mt.digits, mt.unit),
				targetText, verdict})
		}
		sec.tables = append(sec.tables, summary)

		sec.tables = append(sec.tables, breakdown(runs, "Writes per cluster during create", true,
			func(r *runResult) []reqCount { return r.CreateRequests }, float64(n)))
		sec.tables = append(sec.tables, breakdown(runs, "Reads during create (total, not per cluster)", false,
			func(r *runResult) []reqCount { return r.CreateRequests }, 1))
		rest := breakdown(runs, "Requests at rest (total)", false,
			func(r *runResult) []reqCount { return r.RestRequests }, 1)
		restWrites := breakdown(runs, "Writes at rest (total)", true,
			func(r *runResult) []reqCount { return r.RestRequests }, 1)
		rest.rows = append(restWrites.rows, rest.rows...)
		if len(rest.rows) == 0 {
			sec.notes = append(sec.notes, "At rest the controller sent no request at all.")
		} else {
			sec.tables = append(sec.tables, rest)
		}

		perRun := table{header: []string{"Run", "Converged s", "Graph s", "Writes/cluster", "Rest writes", "Heap MiB", "Peak RSS MiB", "Reconciles/cluster", "Load avg at start / end"}}
		for i, r := range runs {
			perRun.rows = append(perRun.rows, []string{fmt.Sprint(i + 1),
				format(r.ConvergedSeconds, 1, ""), format(r.GraphSeconds, 1, ""),
				format(float64(r.CreateWrites)/float64(n), 2, ""), fmt.Sprint(r.RestWrites),
				format(r.End.HeapInuseMiB, 1, ""), format(r.End.PeakRSSMiB, 1, ""),
				format(float64(r.Reconciles)/float64(n), 2, ""), r.LoadAvgStart + " / " + r.LoadAvgEnd})
		}
		sec.tables = append(sec.tables, perRun)
		rep.sections = append(rep.sections, sec)
	}
	return rep
}

// breakdown is a per resource and verb table of writes or reads, divided by div,
// with the median, min and max over runs, and the median of the runs' mean latency.
func breakdown(runs []*runResult, title string, writes bool, of func(*runResult) []reqCount, div float64) table {
	perKey := map[reqKey][]float64{}
	latency := map[reqKey][]float64{}
	for i, r := range runs {
		for _, rc := range of(r) {
			if rc.write() != writes {
				continue
			}
			if perKey[rc.reqKey] == nil {
				perKey[rc.reqKey] = make([]float64, len(runs))
			}
			perKey[rc.reqKey][i] += float64(rc.Count) / div
			if rc.Count > 0 && rc.Verb != "WATCH" {
				latency[rc.reqKey] = append(latency[rc.reqKey], rc.LatencyMs/float64(rc.Count))
			}
		}
	}
	medians := map[reqKey]float64{}
	for k, vs := range perKey {
		medians[k] = statsOf(vs).med
	}
	digits := 0
	if div != 1 {
		digits = 2
	}
	t := table{header: []string{title + ": resource", "Verb", "Median", "Min", "Max", "Mean latency"}}
	for _, k := range sortedKeys(medians) {
		st := statsOf(perKey[k])
		lat := ""
		if len(latency[k]) > 0 {
			lat = format(statsOf(latency[k]).med, 0, " ms")
		}
		t.rows = append(t.rows, []string{k.Resource, k.Verb, format(st.med, digits, ""), format(st.min, digits, ""), format(st.max, digits, ""), lat})
	}
	return t
}

func format(v float64, digits int, unit string) string {
	return fmt.Sprintf("%.*f%s", digits, v, unit)
}

func (r *report) text() string {
	var b strings.Builder
	for _, s := range r.sections {
		fmt.Fprintf(&b, "== %s ==\n", s.heading)
		for _, n := range s.notes {
			fmt.Fprintf(&b, "%s\n", n)
		}
		for _, t := range s.tables {
			if len(t.rows) == 0 {
				continue
			}
			w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, strings.Join(t.header, "\t"))
			for _, row := range t.rows {
				fmt.Fprintln(w, strings.Join(row, "\t"))
			}
			w.Flush()
			b.WriteString("\n")
		}
	}
	for _, l := range r.intro {
		fmt.Fprintf(&b, "%s\n", l)
	}
	return b.String()
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# knest controller benchmark\n\n")
	for _, l := range r.intro {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	for _, s := range r.sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.heading)
		for _, n := range s.notes {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
		for _, t := range s.tables {
			if len(t.rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(t.header, " | "))
			fmt.Fprintf(&b, "|%s\n", strings.Repeat(" --- |", len(t.header)))
			for _, row := range t.rows {
				cells := make([]string, len(row))
				for i, c := range row {
					cells[i] = strings.ReplaceAll(c, "|", `\|`)
					if i == 0 {
						// Keep the visual nesting of sub-rows in markdown.
						if trimmed := strings.TrimLeft(c, " "); trimmed != c {
							cells[i] = "↳ " + trimmed
						}
					}
				}
				fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
