package upgrade

import (
	"bytes"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/knest-dev/knest/pkg/kubever"
	"github.com/knest-dev/knest/pkg/upgrade"
)

// parse parses args with the upgrade command's flags and returns what they hold.
func parse(t *testing.T, args ...string) *flagpole {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand(logr.Discard(), genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	NewWithT(t).Expect(cmd.ParseFlags(args)).To(Succeed())
	fs := cmd.Flags()
	f := &flagpole{}
	f.Version, _ = fs.GetString("version")
	f.HoldPools, _ = fs.GetStringArray("hold-pool")
	f.ReleasePools, _ = fs.GetStringArray("release-pool")
	f.Wait, _ = fs.GetBool("wait")
	f.Timeout, _ = fs.GetDuration("timeout")
	return f
}

func TestFlags(t *testing.T) {
	g := NewWithT(t)
	f := parse(t, "--version", "1.35.4")
	g.Expect(f.Wait).To(BeTrue(), "--wait defaults to true, as for scale")
	g.Expect(f.Timeout).To(Equal(DefaultTimeout))

	f = parse(t, "--version", "v1.35.4", "--hold-pool", "gpu", "--hold-pool", "big", "--release-pool", "old", "--wait=false", "--timeout", "5m")
	g.Expect(f.HoldPools).To(Equal([]string{"gpu", "big"}))
	g.Expect(f.ReleasePools).To(Equal([]string{"old"}))
	g.Expect(f.Wait).To(BeFalse())
	g.Expect(f.Timeout).To(Equal(5 * time.Minute))

	req, err := request(f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(req).To(Equal(upgrade.Request{Version: "v1.35.4", HoldPools: []string{"gpu", "big"}, ReleasePools: []string{"old"}}))
}

func TestRequest(t *testing.T) {
	tests := []struct {
		flags   flagpole
		want    upgrade.Request
		wantErr string
	}{
		{flags: flagpole{Version: "1.35.4"}, want: upgrade.Request{Version: "v1.35.4"}},
		{flags: flagpole{Version: "v1.36.0", HoldPools: []string{"gpu"}}, want: upgrade.Request{Version: "v1.36.0", HoldPools: []string{"gpu"}}},
		{flags: flagpole{}, wantErr: "--version is required: the Kubernetes version to upgrade to, e.g. v1.35.4"},
		{flags: flagpole{Version: "1.37.0"}, wantErr: "--version 1.37.0: " + kubever.RangeMessage},
		{flags: flagpole{Version: "latest"}, wantErr: "--version latest: " + kubever.RangeMessage},
		{flags: flagpole{Version: "v1.35.4", HoldPools: []string{"gpu"}, ReleasePools: []string{"gpu"}}, wantErr: "pool gpu cannot be both held and released"},
		{flags: flagpole{Version: "v1.35.4", HoldPools: []string{"cp"}}, wantErr: `pool "cp": pool name cp is reserved`},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		req, err := request(&tt.flags)
		if tt.wantErr != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)), "flags %+v", tt.flags)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(req).To(Equal(tt.want))
	}
}
