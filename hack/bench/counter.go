package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// reqKey is one row of the request breakdown: a resource (plural, with subresource,
// e.g. "nestedclusters/status") and a verb. Verbs are the HTTP method for writes
// (PATCH carries its patch type: "PATCH apply", "PATCH merge") and GET / LIST /
// WATCH for reads.
type reqKey struct {
	Resource string `json:"resource"`
	Verb     string `json:"verb"`
}

func (k reqKey) write() bool { return isWrite(k.Verb) }

func isWrite(verb string) bool {
	switch strings.Fields(verb)[0] {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// counter counts the requests that go through its transport. It sits below
// client-go's rate limiter, so it sees each request when it is actually sent.
type counter struct {
	// trace names resources whose write requests are printed (a few of each), to
	// see what the controller writes and why.
	trace    map[string]int
	traceMax int

	mu        sync.Mutex
	counts    map[reqKey]int
	failures  map[reqKey]int // responses with status >= 400 (or transport errors)
	lastWrite map[string]time.Time
	// latency is the total time from sending a request to its response headers.
	latency map[reqKey]time.Duration
}

func newCounter() *counter {
	c := &counter{}
	c.reset()
	return c
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[reqKey]int{}
	c.failures = map[reqKey]int{}
	c.lastWrite = map[string]time.Time{}
	c.latency = map[reqKey]time.Duration{}
}

// wrap is a rest.Config WrapTransport function.
func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		k := classify(req)
		if k.write() && c.traceMax > 0 {
			c.traceWrite(k, req)
		}
		sent := time.Now()
		resp, err := rt.RoundTrip(req)
		failed := err != nil || resp.StatusCode >= 400
		now := time.Now()
		c.mu.Lock()
		c.counts[k]++
		c.latency[k] += now.Sub(sent)
		if failed {
			c.failures[k]++
		}
		if k.write() {
			c.lastWrite[k.Resource] = now
		}
		c.mu.Unlock()
		return resp, err
	})
}

func (c *counter) traceWrite(k reqKey, req *http.Request) {
	c.mu.Lock()
	n, ok := c.trace[k.Resource]
	if ok && n < c.traceMax {
		c.trace[k.Resource]++
	}
	c.mu.Unlock()
	if !ok || n >= c.traceMax {
		return
	}
	body := ""
	if req.GetBody != nil {
		if r, err := req.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(r, 4096))
			r.Close()
			body = string(b)
		}
	}
	fmt.Fprintf(os.Stderr, "TRACE %s %s %s %s\n", time.Now().Format("15:04:05.000"), k.Verb, req.URL.Path, body)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// snapshot is a copy of the counter at one instant.
type snapshot struct {
	Counts    map[reqKey]int
	Latency   map[reqKey]time.Duration
	Failures  map[reqKey]int
	LastWrite map[string]time.Time
}

func (c *counter) snapshot() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := snapshot{Counts: map[reqKey]int{}, Latency: map[reqKey]time.Duration{}, Failures: map[reqKey]int{}, LastWrite: map[string]time.Time{}}
	for k, v := range c.counts {
		s.Counts[k] = v
		s.Latency[k] = c.latency[k]
	}
	for k, v := range c.failures {
		s.Failures[k] = v
	}
	for k, v := range c.lastWrite {
		s.LastWrite[k] = v
	}
	return s
}

type snapshotJSON struct {
	Counts    []reqCount           `json:"counts"`
	Failures  []reqCount           `json:"failures"`
	LastWrite map[string]time.Time `json:"lastWrite"`
}

// MarshalJSON and UnmarshalJSON carry a snapshot from a controller process.
func (s snapshot) MarshalJSON() ([]byte, error) {
	j := snapshotJSON{LastWrite: s.LastWrite}
	j.Counts = s.counts()
	for k, v := range s.Failures {
		j.Failures = append(j.Failures, reqCount{reqKey: k, Count: v})
	}
	return json.Marshal(j)
}

func (s *snapshot) UnmarshalJSON(b []byte) error {
	var j snapshotJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = snapshot{Counts: map[reqKey]int{}, Latency: map[reqKey]time.Duration{}, Failures: map[reqKey]int{}, LastWrite: j.LastWrite}
	if s.LastWrite == nil {
		s.LastWrite = map[string]time.Time{}
	}
	for _, c := range j.Counts {
		s.Counts[c.reqKey] = c.Count
		s.Latency[c.reqKey] = time.Duration(c.LatencyMs * float64(time.Millisecond))
	}
	for _, c := range j.Failures {
		s.Failures[c.reqKey] = c.Count
	}
	return nil
}

// writes is the number of write requests in s.
func (s snapshot) writes() int {
	n := 0
	for k, v := range s.Counts {
		if k.write() {
			n += v
		}
	}
	return n
}

// lastWriteTime is the time of the newest write, optionally ignoring some
// resources (zero when there was none).
func (s snapshot) lastWriteTime(ignore ...string) time.Time {
	var last time.Time
	for r, t := range s.LastWrite {
		if contains(ignore, r) {
			continue
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

// counts lists the request counts with their total latency.
func (s snapshot) counts() []reqCount {
	var out []reqCount
	for k, v := range s.Counts {
		out = append(out, reqCount{reqKey: k, Count: v, LatencyMs: float64(s.Latency[k]) / float64(time.Millisecond)})
	}
	return out
}

// minus returns the requests in s that were not yet in earlier.
func (s snapshot) minus(earlier snapshot) []reqCount {
	var out []reqCount
	for k, v := range s.Counts {
		if d := v - earlier.Counts[k]; d != 0 {
			out = append(out, reqCount{reqKey: k, Count: d,
				LatencyMs: float64(s.Latency[k]-earlier.Latency[k]) / float64(time.Millisecond)})
		}
	}
	return out
}

// classify names the resource and verb of an API request from its URL:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUB]].
func classify(req *http.Request) reqKey {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return reqKey{Resource: "(discovery) " + req.URL.Path, Verb: req.Method}
	}
	if len(segs) == 0 {
		return reqKey{Resource: "(discovery) " + req.URL.Path, Verb: req.Method}
	}
	if segs[0] == "namespaces" && len(segs) >= 3 {
		segs = segs[2:]
	}
	resource, named := segs[0], len(segs) >= 2
	if len(segs) >= 3 {
		resource += "/" + strings.Join(segs[2:], "/")
	}
	verb := req.Method
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "WATCH"
		case !named:
			verb = "LIST"
		}
	case http.MethodPatch:
		verb += " " + patchType(req.Header.Get("Content-Type"))
	}
	return reqKey{Resource: resource, Verb: verb}
}

func patchType(contentType string) string {
	switch {
	case strings.HasPrefix(contentType, "application/apply-patch"):
		return "apply"
	case strings.HasPrefix(contentType, "application/merge-patch"):
		return "merge"
	case strings.HasPrefix(contentType, "application/strategic-merge-patch"):
		return "strategic"
	case strings.HasPrefix(contentType, "application/json-patch"):
		return "json"
	}
	return "?"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sortedKeys orders a breakdown by count (descending), then resource and verb.
func sortedKeys(m map[reqKey]float64) []reqKey {
	keys := make([]reqKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if m[a] != m[b] {
			return m[a] > m[b]
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Verb < b.Verb
	})
	return keys
}
