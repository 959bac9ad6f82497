package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Spinner draws a spinner and a message on one terminal line, and lets other
// output pass: a Write clears the spinner line first, so log lines are not torn.
type Spinner struct {
	mu      sync.Mutex
	w       io.Writer
	suffix  string
	running bool
	stop    chan struct{}
	done    chan struct{}
}

var _ io.Writer = &Spinner{}

// NewSpinner returns a Spinner drawing on w, which should be a terminal.
func NewSpinner(w io.Writer) *Spinner { return &Spinner{w: w} }

// SetSuffix sets the message shown after the spinner.
func (s *Spinner) SetSuffix(suffix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.suffix = suffix
}

// Start starts drawing; it does nothing if the spinner already runs.
func (s *Spinner) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	s.running = true
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.spin(s.stop, s.done)
}

func (s *Spinner) spin(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			// \x1b[?7l disables line wrap while drawing, \x1b[K clears the rest.
			fmt.Fprintf(s.w, "\r\x1b[?7l %s %s\x1b[K\x1b[?7h", spinnerFrames[i%len(spinnerFrames)], s.suffix)
			s.mu.Unlock()
		}
	}
}

// Stop stops drawing and clears the spinner line.
func (s *Spinner) Stop() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	close(s.stop)
	done := s.done
	s.mu.Unlock()
	<-done
	s.mu.Lock()
	fmt.Fprint(s.w, "\r\x1b[K")
	s.mu.Unlock()
}

// Write clears the spinner line and writes p; the next frame redraws the spinner.
func (s *Spinner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		fmt.Fprint(s.w, "\r\x1b[K")
	}
	return s.w.Write(p)
}
