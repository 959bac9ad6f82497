package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// An API server that answers only from its fourth request on: the wait goes on
// through the refusals and ends at the first answer.
func TestWaitForAPIWaitsForAnAnswer(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 4 || r.URL.Path != "/version" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"major": "1", "minor": "35", "gitVersion": "v1.35.4"}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	g.Expect(waitForAPI(ctx, &rest.Config{Host: srv.URL}, 10*time.Millisecond)).To(Succeed())
	g.Expect(calls.Load()).To(BeEquivalentTo(4))
}

// No API server at all: the wait ends only with its context, and says so.
func TestWaitForAPIEndsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := waitForAPI(ctx, &rest.Config{Host: url}, 10*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("the tenant's API server did not answer")))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
}
