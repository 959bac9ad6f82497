package testenv

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RunManager starts mgr until the returned stop is called, and at the latest when
// the test ends; an error from the manager fails the test.
//
// stop cancels the manager only once it has started its controllers: the
// controller-runtime in use (v0.23.3) does not cut a runnable group's start short on
// cancellation (kubernetes-sigs/controller-runtime#3440), and a test that stopped a
// manager just after its first reconcile once saw it wait out its 30 s grace period.
// Should a stop still take over 10 s, it prints the goroutines so that the failure
// shows what the manager waited for.
func RunManager(t testing.TB, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		select {
		case <-mgr.Elected(): // every controller started
		case <-done: // failed to start
		}
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Say what it waits for: the manager gives up only after 30 s.
			t.Logf("the manager has not stopped after 10 s; its goroutines:")
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}
