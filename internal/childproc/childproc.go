// Package childproc runs the long-lived child processes of knest's test environments
// (kube-controller-manager, the Cluster API managers) with their output in a log file,
// and stops them with a grace period.
package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// Process is a started child process.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // set before done is closed
}

// Start starts args with env added to this process's environment. Output is appended
// to logPath, after the command line, so that a retried start keeps earlier output.
func Start(name, logPath string, env []string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	fmt.Fprintf(logFile, "+ %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// LogPath is the file the process writes to.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM and, if the process has not exited after a grace period, SIGKILL.
// It returns once the process is gone.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// ExitError reports an exit nobody asked for, with the end of the log to say why.
// Call it once Done is closed.
func (p *Process) ExitError() error {
	b, _ := os.ReadFile(p.logPath)
	return fmt.Errorf("%s exited: %v; last log lines:\n%s", p.name, p.err, Tail(string(b), 20))
}

// LogTails returns the last lines of each named process's log, <dir>/<name>.log (all
// of it for lines <= 0), under a header naming the process and the file; logs that
// do not exist are left out. For a test to print on failure.
func LogTails(dir string, lines int, names ...string) string {
	var b strings.Builder
	for _, name := range names {
		path := filepath.Join(dir, name+".log")
		if data, err := os.ReadFile(path); err == nil {
			fmt.Fprintf(&b, "===== %s (%s) =====\n%s\n", name, path, Tail(string(data), lines))
		}
	}
	return b.String()
}

// FirstExit returns the exit error of the first of procs that has exited, or nil
// while all run; for processes meant to run until stopped.
func FirstExit(procs []*Process) error {
	for _, p := range procs {
		select {
		case <-p.Done():
			return p.ExitError()
		default:
		}
	}
	return nil
}

// Tail returns the last n lines of s (all of s for n <= 0).
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
