// Package cli holds what knest's commands share to talk to a person: a logr sink that
// writes plain lines to stderr with a verbosity that -v changes, a spinner for
// terminals, and status lines (✓ / ✗) in the manner of kind.
package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"golang.org/x/term"
)

// Logger writes log lines as plain text: V(0) messages as they are, higher levels
// with a DEBUG prefix, errors with an ERROR prefix. Its writer and verbosity can be
// changed after the logr.Logger was handed out (the root command does so for -q/-v).
type Logger struct {
	mu        sync.Mutex
	writer    io.Writer
	verbosity atomic.Int32
}

// NewLogger returns a Logger writing to w.
func NewLogger(w io.Writer, verbosity int) *Logger {
	l := &Logger{writer: w}
	l.verbosity.Store(int32(verbosity))
	return l
}

// Logr returns a logr.Logger backed by l.
func (l *Logger) Logr() logr.Logger { return logr.New(&sink{l: l}) }

// SetWriter replaces the writer.
func (l *Logger) SetWriter(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writer = w
}

// Writer returns the current writer.
func (l *Logger) Writer() io.Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writer
}

// SetVerbosity sets the highest V level that is printed.
func (l *Logger) SetVerbosity(v int) { l.verbosity.Store(int32(v)) }

// Verbosity returns the highest V level that is printed.
func (l *Logger) Verbosity() int { return int(l.verbosity.Load()) }

func (l *Logger) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.writer.Write(p)
}

// FromLogr returns the Logger behind logger, or nil if logger is not backed by one.
func FromLogr(logger logr.Logger) *Logger {
	if s, ok := logger.GetSink().(*sink); ok {
		return s.l
	}
	return nil
}

// sink implements logr.LogSink for Logger.
type sink struct {
	l      *Logger
	name   string
	values []any
}

var _ logr.LogSink = &sink{}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool { return level <= s.l.Verbosity() }

func (s *sink) Info(level int, msg string, kv ...any) {
	prefix := ""
	if level > 0 {
		prefix = "DEBUG: "
	}
	s.l.write(s.format(prefix, msg, nil, kv))
}

func (s *sink) Error(err error, msg string, kv ...any) {
	s.l.write(s.format("ERROR: ", msg, err, kv))
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{l: s.l, name: s.name, values: append(append([]any{}, s.values...), kv...)}
}

func (s *sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &sink{l: s.l, name: name, values: s.values}
}

func (s *sink) format(prefix, msg string, err error, kv []any) []byte {
	var b bytes.Buffer
	b.WriteString(prefix)
	if s.name != "" && prefix != "" {
		b.WriteString(s.name + ": ")
	}
	b.WriteString(msg)
	if err != nil {
		if msg != "" {
			b.WriteString(": ")
		}
		b.WriteString(err.Error())
	}
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		fmt.Fprintf(&b, " %v=%v", all[i], all[i+1])
	}
	if b.Len() == 0 || b.Bytes()[b.Len()-1] != '\n' {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// IsTerminal reports whether w is a terminal that understands cursor movement.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
