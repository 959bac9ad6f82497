package cli

import (
	"github.com/go-logr/logr"
)

// Status prints progress as short lines: "✓ done thing", "✗ failed thing". On a
// terminal (the logger writes to a Spinner) the current activity spins on its own
// line; elsewhere it is printed as "• activity ..." each time it changes, so a log
// (CI, a script) says what a long wait is blocked on, not only that it waits.
type Status struct {
	logger  logr.Logger
	spinner *Spinner
	color   bool
	active  string
}

// StatusForLogger returns a Status printing through logger. It uses a spinner when
// logger is a cli Logger writing to one.
func StatusForLogger(logger logr.Logger) *Status {
	s := &Status{logger: logger}
	if l := FromLogr(logger); l != nil {
		if sp, ok := l.Writer().(*Spinner); ok {
			s.spinner = sp
			s.color = true
		}
	}
	return s
}

// Start begins an activity.
func (s *Status) Start(activity string) {
	s.active = activity
	if s.spinner != nil {
		s.spinner.SetSuffix(activity)
		s.spinner.Start()
		return
	}
	s.logger.Info(" • " + activity + " ...")
}

// Update changes the text of the running activity; without a terminal it prints the
// new text as a line, and nothing when the text is unchanged.
func (s *Status) Update(activity string) {
	if activity == s.active {
		return
	}
	s.active = activity
	if s.spinner != nil {
		s.spinner.SetSuffix(activity)
		return
	}
	s.logger.Info(" • " + activity + " ...")
}

// Success prints a line marked ✓.
func (s *Status) Success(msg string) {
	if s.color {
		s.logger.Info(" \x1b[32m✓\x1b[0m " + msg)
		return
	}
	s.logger.Info(" ✓ " + msg)
}

// Note prints a line marked •: a fact to know that is neither done nor failed, e.g.
// what a command leaves as it was.
func (s *Status) Note(msg string) {
	s.logger.Info(" • " + msg)
}

// Failure prints a line marked ✗.
func (s *Status) Failure(msg string) {
	if s.color {
		s.logger.Info(" \x1b[31m✗\x1b[0m " + msg)
		return
	}
	s.logger.Info(" ✗ " + msg)
}

// End stops the spinner, if any.
func (s *Status) End() {
	s.active = ""
	if s.spinner != nil {
		s.spinner.Stop()
	}
}
