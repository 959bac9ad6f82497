// Command localenv runs knest's local host environment (package e2e/localenv) in the
// background for `make demo`:
//
//	localenv up -state DIR     start it (once) and wait until it serves
//	localenv down -state DIR   stop it: every VM, manager and the test bed
//
// DIR/host.kubeconfig is the host cluster's admin kubeconfig while it runs;
// DIR/localenv.log is its output and DIR/logs one log per component.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/knest-dev/knest/e2e/localenv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: localenv up|down|serve -state DIR")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	state := fs.String("state", "", "directory of the environment's state (required)")
	timeout := fs.Duration("timeout", 10*time.Minute, "with up: how long to wait for the environment")
	_ = fs.Parse(os.Args[2:])
	if *state == "" {
		fmt.Fprintln(os.Stderr, "localenv: -state is required")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(*state, *timeout)
	case "down":
		err = down(*state)
	case "serve":
		err = serve(*state)
	default:
		err = fmt.Errorf("unknown command %q: up, down or serve", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
}

func pidFile(state string) string    { return filepath.Join(state, "localenv.pid") }
func kubeconfig(state string) string { return filepath.Join(state, "host.kubeconfig") }
func logFile(state string) string    { return filepath.Join(state, "localenv.log") }
func readyFile(state string) string  { return filepath.Join(state, "ready") }
func failedFile(state string) string { return filepath.Join(state, "failed") }

// running returns the pid of a live environment of this state directory, or 0.
func running(state string) int {
	b, err := os.ReadFile(pidFile(state))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

func up(state string, timeout time.Duration) error {
	if pid := running(state); pid != 0 {
		if _, err := os.Stat(readyFile(state)); err == nil {
			fmt.Printf("The local host environment is already running (pid %d).\n", pid)
			printUsage(state)
			return nil
		}
		return fmt.Errorf("an environment (pid %d) is starting or stuck; see %s, or run `localenv down -state %s`", pid, logFile(state), state)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	for _, f := range []string{readyFile(state), failedFile(state), kubeconfig(state)} {
		_ = os.Remove(f)
	}
	log, err := os.Create(logFile(state))
	if err != nil {
		return err
	}
	defer log.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "serve", "-state", state)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = os.Environ()
	// Its own session: it outlives this command and the terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(state), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("Starting the local host environment (test bed, Cluster API, CAPK, KubeVirt stand-in, knest controller); log: %s\n", logFile(state))
	deadline := time.After(timeout)
	for {
		if _, err := os.Stat(readyFile(state)); err == nil {
			printUsage(state)
			return nil
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile(state))
			return fmt.Errorf("the environment exited (%v):\n%s", err, tail(string(b), 30))
		case <-deadline:
			return fmt.Errorf("the environment did not come up within %s; see %s", timeout, logFile(state))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func printUsage(state string) {
	fmt.Printf("Host cluster: export KUBECONFIG=%s\n", kubeconfig(state))
}

// serve runs the environment in the foreground until SIGTERM or SIGINT.
func serve(state string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	env, err := localenv.Start(ctx, localenv.Options{StateDir: state})
	if err != nil {
		_ = os.WriteFile(failedFile(state), []byte(err.Error()), 0o644)
		return err
	}
	defer func() {
		fmt.Println("stopping")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop: %v\n", err)
		}
		_ = os.Remove(kubeconfig(state))
		_ = os.Remove(readyFile(state))
		_ = os.Remove(pidFile(state))
	}()
	if err := env.Host.WriteKubeconfig(kubeconfig(state)); err != nil {
		return err
	}
	if err := os.WriteFile(readyFile(state), nil, 0o644); err != nil {
		return err
	}
	fmt.Println("ready")
	select {
	case <-ctx.Done():
	case <-providersExited(env):
		return env.Providers.Err()
	}
	return nil
}

// providersExited closes when a provider manager has exited.
func providersExited(env *localenv.Env) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for env.Providers.Err() == nil {
			time.Sleep(5 * time.Second)
		}
		close(ch)
	}()
	return ch
}

func down(state string) error {
	pid := running(state)
	if pid == 0 {
		fmt.Println("The local host environment is not running.")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return errors.New("the environment did not stop within 2 minutes and was killed")
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Println("The local host environment is stopped: no VM, manager or API server is left running.")
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
