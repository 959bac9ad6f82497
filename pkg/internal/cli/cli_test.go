package cli

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

func TestLogger(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	l := NewLogger(&buf, 0)
	log := l.Logr()

	log.Info("Creating cluster", "name", "demo")
	log.V(1).Info("hidden at verbosity 0")
	log.Error(errors.New("boom"), "")
	log.Error(errors.New("boom"), "failed to do it")
	g.Expect(buf.String()).To(Equal("Creating cluster name=demo\nERROR: boom\nERROR: failed to do it: boom\n"))

	buf.Reset()
	l.SetVerbosity(1)
	log.WithName("wait").WithValues("cluster", "demo").V(1).Info("watching")
	g.Expect(buf.String()).To(Equal("DEBUG: wait: watching cluster=demo\n"))

	buf.Reset()
	l.SetVerbosity(-1) // -q
	g.Expect(log.V(0).Enabled()).To(BeFalse())
	var other bytes.Buffer
	l.SetWriter(&other)
	log.Error(errors.New("x"), "")
	g.Expect(other.String()).To(Equal("ERROR: x\n"), "errors ignore verbosity; -q silences them by swapping the writer")
	g.Expect(FromLogr(log)).To(BeIdenticalTo(l))
}

func TestStatusWithoutTerminal(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	s := StatusForLogger(NewLogger(&buf, 0).Logr())
	s.Start("Waiting for cluster demo")
	s.Update("Waiting for cluster demo: control plane 0/1 ready")
	s.Update("Waiting for cluster demo: control plane 0/1 ready")
	s.Success("control plane 1/1 ready")
	s.Failure("workers 0/2 ready")
	s.Note("pool gpu stays held at v1.34.4")
	s.End()
	g.Expect(buf.String()).To(Equal(" • Waiting for cluster demo ...\n • Waiting for cluster demo: control plane 0/1 ready ...\n ✓ control plane 1/1 ready\n ✗ workers 0/2 ready\n • pool gpu stays held at v1.34.4\n"),
		"an update prints once, when its text changes")
}

func TestStatusWithSpinner(t *testing.T) {
	g := NewWithT(t)
	var buf syncBuffer
	sp := NewSpinner(&buf)
	s := StatusForLogger(NewLogger(sp, 0).Logr())
	s.Start("Waiting")
	g.Eventually(buf.String).Should(ContainSubstring("Waiting"))
	s.Success("done")
	s.End()
	out := buf.String()
	g.Expect(out).To(ContainSubstring("\x1b[32m✓\x1b[0m done\n"))
	g.Expect(strings.HasSuffix(out, "\r\x1b[K")).To(BeTrue(), "the spinner line is cleared when it stops")
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
