// Package cmdutil holds what several knest commands share: the host cluster
// connection flags, building a knest.Client from them, and checks of common flags.
package cmdutil

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/knest-dev/knest/pkg/knest"
	"github.com/knest-dev/knest/pkg/validation"
)

// Names of the host cluster connection flags the root command adds.
const (
	KubeconfigFlag = "kubeconfig"
	ContextFlag    = "context"
	NamespaceFlag  = "namespace"
	// RequestTimeoutFlag is kubectl's --request-timeout ("30s", "1m"; 0: no limit).
	RequestTimeoutFlag = "request-timeout"
)

// DefaultRequestTimeout bounds each request to the host cluster's API server, so that
// a server that accepts connections but does not answer fails a command in seconds
// rather than hanging it (kubectl's default is no limit). Waits outlast it: they
// retry until their own --timeout.
const DefaultRequestTimeout = "30s"

// newConfigFlags returns kubectl's connection flags, reduced to --kubeconfig,
// --context, -n/--namespace and --request-timeout (a nil field is neither a flag nor
// an override).
func newConfigFlags() *genericclioptions.ConfigFlags {
	str := func(v string) *string { return &v }
	return &genericclioptions.ConfigFlags{
		KubeConfig: str(""),
		Context:    str(""),
		Namespace:  str(""),
		Timeout:    str(DefaultRequestTimeout),
	}
}

// AddKubeFlags adds --kubeconfig, --context, -n/--namespace and --request-timeout to
// fs.
func AddKubeFlags(fs *pflag.FlagSet) {
	newConfigFlags().AddFlags(fs)
}

// KubeFlags returns the host cluster connection settings as parsed for cmd. A command
// run without the root command (as in some tests) gets the defaults.
func KubeFlags(cmd *cobra.Command) *genericclioptions.ConfigFlags {
	cf := newConfigFlags()
	for name, value := range map[string]*string{KubeconfigFlag: cf.KubeConfig, ContextFlag: cf.Context, NamespaceFlag: cf.Namespace, RequestTimeoutFlag: cf.Timeout} {
		if f := cmd.Flags().Lookup(name); f != nil {
			*value = f.Value.String()
		}
	}
	return cf
}

// ClientConfig loads the kubeconfig the way kubectl does ($KUBECONFIG, ~/.kube/config,
// in-cluster) with the flags of cmd applied. Unlike kubectl it has no fallback to
// localhost:8080: without a kubeconfig, using it is an error that says so.
func ClientConfig(cmd *cobra.Command) clientcmd.ClientConfig {
	cf := KubeFlags(cmd)
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *cf.KubeConfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: *cf.Context, Timeout: *cf.Timeout}
	overrides.Context.Namespace = *cf.Namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// Namespace returns the namespace to work in: -n, else the kubeconfig context's, else
// "default". explicit tells whether -n was given.
func Namespace(cmd *cobra.Command) (ns string, explicit bool, err error) {
	if ns := *KubeFlags(cmd).Namespace; ns != "" {
		if !validation.NamespaceValid(ns) {
			return "", true, fmt.Errorf("--namespace %q: %s", ns, validation.NamespaceMessage)
		}
		return ns, true, nil
	}
	ns, _, err = ClientConfig(cmd).Namespace()
	if clientcmd.IsEmptyConfig(err) {
		return "default", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("failed to read the namespace from the kubeconfig: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	return ns, false, nil
}

// NewClient returns a knest.Client for the host cluster the flags of cmd select.
func NewClient(cmd *cobra.Command, logger logr.Logger) (*knest.Client, error) {
	cfg, err := ClientConfig(cmd).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no kubeconfig for the host cluster: set --kubeconfig or KUBECONFIG, or create ~/.kube/config")
	}
	if err != nil {
		return nil, fmt.Errorf("failed to load the kubeconfig of the host cluster: %w", err)
	}
	return knest.NewClientForConfig(cfg, knest.WithLogger(logger))
}

// CheckOutput checks an -o value against the formats a command supports.
func CheckOutput(format string, allowed ...string) error {
	if format == "" || slices.Contains(allowed, format) {
		return nil
	}
	return fmt.Errorf("unsupported output format %q: use one of %s", format, strings.Join(allowed, ", "))
}

// AddWaitFlags adds --wait (default true) and --timeout.
func AddWaitFlags(fs *pflag.FlagSet, wait *bool, timeout *time.Duration, defaultTimeout time.Duration, what string) {
	fs.BoolVar(wait, "wait", true, "wait until "+what)
	fs.DurationVar(timeout, "timeout", defaultTimeout, "how long to wait before giving up (with --wait)")
}

// WaitTimeout returns how long to wait: 0 without --wait. A --timeout that is not
// positive is an error, because waits never run forever.
func WaitTimeout(wait bool, timeout time.Duration) (time.Duration, error) {
	if !wait {
		return 0, nil
	}
	if timeout <= 0 {
		return 0, fmt.Errorf("--timeout must be positive (got %s); to return without waiting use --wait=false", timeout)
	}
	return timeout, nil
}

// CompleteClusterNames completes cluster names for the commands that take them.
func CompleteClusterNames(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := NewClient(cmd, logr.Discard())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, _, err := Namespace(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	items, err := c.List(cmd.Context(), ns)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, nc := range items {
		if strings.HasPrefix(nc.Name, toComplete) {
			names = append(names, nc.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
