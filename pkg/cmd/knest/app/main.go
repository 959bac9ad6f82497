// Package app is knest's main: it builds the root command, runs it and prints an
// error once, at the top.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/knest-dev/knest/pkg/cmd/knest"
	"github.com/knest-dev/knest/pkg/internal/cli"
)

// Main is knest's main(): it runs the command line and exits 1 on error.
func Main() {
	if err := Run(NewLogger(), StandardIOStreams(), os.Args[1:]); err != nil {
		os.Exit(1)
	}
}

// StandardIOStreams returns stdin, stdout and stderr.
func StandardIOStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// NewLogger returns the CLI logger: plain lines on stderr, through a spinner when
// stderr is a terminal.
func NewLogger() logr.Logger {
	var w io.Writer = os.Stderr
	if cli.IsTerminal(os.Stderr) {
		w = cli.NewSpinner(os.Stderr)
	}
	return cli.NewLogger(w, 0).Logr()
}

// Run runs knest with args until it finishes or the process gets SIGINT/SIGTERM.
func Run(logger logr.Logger, streams genericiooptions.IOStreams, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return RunContext(ctx, logger, streams, args)
}

// RunContext runs knest with args. It prints an error once, as "ERROR: ...", with
// details only at -v 1 or more; it returns the error for the exit code.
func RunContext(ctx context.Context, logger logr.Logger, streams genericiooptions.IOStreams, args []string) error {
	if checkQuiet(args) {
		// Silence everything but the program's output, before any flag is parsed.
		if l := cli.FromLogr(logger); l != nil {
			l.SetWriter(io.Discard)
			l.SetVerbosity(-1)
		} else {
			logger = logr.Discard()
		}
		streams.ErrOut = io.Discard
	}
	cmd := knest.NewCommand(logger, streams)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		err = unreachable(err)
		logError(logger, err)
		return err
	}
	return nil
}

// checkQuiet reports whether -q/--quiet is among args.
func checkQuiet(args []string) bool {
	fs := pflag.NewFlagSet("quiet", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	quiet := fs.BoolP("quiet", "q", false, "")
	_ = fs.Parse(args)
	return *quiet
}

func logError(logger logr.Logger, err error) {
	logger.Error(err, "")
	if !logger.V(1).Enabled() {
		return
	}
	for _, detail := range details(err) {
		logger.V(1).Info(detail)
	}
}

// unreachable rewrites an error of not getting through to the host cluster's API
// server at all (refused, reset, no route, unknown host, no answer in time) into one
// that says so and names the server; the request that failed says little to a user.
func unreachable(err error) error {
	var status apierrors.APIStatus
	var uerr *url.Error
	if errors.As(err, &status) || !errors.As(err, &uerr) {
		return err
	}
	var nerr net.Error
	var dns *net.DNSError
	timeout := errors.As(uerr, &nerr) && nerr.Timeout()
	if !timeout && !errors.As(uerr, &dns) && !errors.Is(uerr, syscall.ECONNREFUSED) && !errors.Is(uerr, syscall.ECONNRESET) &&
		!errors.Is(uerr, syscall.EHOSTUNREACH) && !errors.Is(uerr, syscall.ENETUNREACH) {
		return err
	}
	server := uerr.URL
	if u, perr := url.Parse(uerr.URL); perr == nil {
		server = u.Scheme + "://" + u.Host
	}
	what := "is not reachable"
	if timeout {
		what = "did not answer in time"
	}
	return fmt.Errorf("the host cluster's API server %s %s (%w); check that it is up and that --kubeconfig and --context point at it (--request-timeout bounds each request)", server, what, uerr.Err)
}

// details are what -v adds to an error: the full status the API server returned, with
// the fields it refused.
func details(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	s := status.Status()
	out := []string{fmt.Sprintf("API status: code %d, reason %s: %s", s.Code, s.Reason, s.Message)}
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			out = append(out, fmt.Sprintf("API cause: %s: %s (%s)", c.Field, c.Message, c.Type))
		}
	}
	return out
}
