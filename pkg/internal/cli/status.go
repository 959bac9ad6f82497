package cli

import (
	"github.com/go-logr/logr"
)

// Status prints progress as short lines: "✓ done thing", "✗ failed thing". On a
// terminal (the logger writes to a Spinner) the current activity spins on its own
// line; elsewhere it is printed once as "• activity ...".
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

// Update changes the text of the running activity. It only shows on a terminal.
func (s *Status) Update(activity string) {
	if activity == s.active {
		return
	}
	s.active = activity
	if s.spinner != nil {
		s.spinner.SetSuffix(activity)
	}
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
