package controller

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
)

func TestJSONLogsCarryKlogToo(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	logger, err := newLogger("json", logr.Discard(), &buf)
	g.Expect(err).NotTo(HaveOccurred())
	klog.SetLogger(logger)
	t.Cleanup(klog.ClearLogger)

	logger.Info("Reconciled", "cluster", "demo")
	klog.InfoS("successfully acquired lease", "lease", "knest-system/knest-controller.knest.dev")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	g.Expect(lines).To(HaveLen(2))
	var first, second map[string]any
	g.Expect(json.Unmarshal([]byte(lines[0]), &first)).To(Succeed())
	g.Expect(json.Unmarshal([]byte(lines[1]), &second)).To(Succeed())
	g.Expect(first).To(HaveKeyWithValue("msg", "Reconciled"))
	g.Expect(first).To(HaveKeyWithValue("cluster", "demo"))
	g.Expect(second).To(HaveKeyWithValue("msg", "successfully acquired lease"))

	_, err = newLogger("xml", logr.Discard(), &buf)
	g.Expect(err).To(MatchError(`--log-format "xml": use text or json`))
}

func TestBadFlagsStopBeforeTheCluster(t *testing.T) {
	for args, want := range map[string]string{
		"--bootstrap-check=maybe":    `--bootstrap-check must be ssh or none, not "maybe"`,
		"--cpu-allocation-ratio=0":   "--cpu-allocation-ratio must be 1 or more, not 0",
		"--node-startup-timeout=30s": "--node-startup-timeout must be a minute or more, not 30s",
		"--host-slowdown=0":          "--host-slowdown must be 1 to 10, not 0",
		"--host-slowdown=11":         "--host-slowdown must be 1 to 10, not 11",
	} {
		t.Run(args, func(t *testing.T) {
			g := NewWithT(t)
			cmd := NewCommand(logr.Discard(), genericiooptions.NewTestIOStreamsDiscard())
			cmd.SetArgs([]string{args})
			g.Expect(cmd.Execute()).To(MatchError(want))
		})
	}
}
