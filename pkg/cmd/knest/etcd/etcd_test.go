package etcd

import (
	"bytes"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/knest-dev/knest/pkg/backup"
)

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// startEtcd runs a real one-member etcd on dir as name and returns a client of it.
func startEtcd(t *testing.T, dir, name string, peer url.URL) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir, cfg.Name = dir, name
	cfg.LogOutputs = []string{"/dev/null"}
	client := freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// run runs `knest etcd` with args and returns its standard output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// restore, as the restore Job runs it: a snapshot of a real etcd becomes a data
// directory, made by the command, that a new member starts from with the object in it.
func TestRestoreMakesADataDirectoryANewMemberStartsFrom(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := startEtcd(t, t.TempDir(), "a", freeURL(t))
	_, err := c.Put(ctx, "/registry/configmaps/default/kept", "v")
	g.Expect(err).NotTo(HaveOccurred())
	snapshots := t.TempDir()
	r, err := backup.Save(ctx, zap.NewNop(), c.Endpoints(), nil, snapshots, time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	data := filepath.Join(t.TempDir(), "etcd")
	peer := freeURL(t)
	out, err := run(t, "restore", "--snapshot", filepath.Join(snapshots, r.Name), "--data-dir", data, "--name", "b", "--peer-url", peer.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("restored " + r.Name + " as member b\n"))

	restored, err := startEtcd(t, data, "b", peer).Get(ctx, "/registry/configmaps/default/kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(restored.Kvs).To(HaveLen(1))
	g.Expect(string(restored.Kvs[0].Value)).To(Equal("v"))
}

// Bad arguments are refused before anything is read, dialled or written.
func TestBadArgumentsAreRefusedFirst(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	_, err := run(t, "snapshot", "--endpoint", "https://127.0.0.1:1", "--certs", filepath.Join(dir, "none"), "--dir", dir, "--keep", "0")
	g.Expect(err).To(MatchError("--keep must be 1 or more"))

	data := filepath.Join(dir, "etcd")
	_, err = run(t, "restore", "--snapshot", filepath.Join(dir, "other.db"), "--data-dir", data, "--name", "b", "--peer-url", "http://127.0.0.1:2380")
	g.Expect(err).To(MatchError(ContainSubstring("is not a knest snapshot")))
	g.Expect(data).NotTo(BeADirectory())

	_, err = run(t, "replace-member", "--endpoint", "https://127.0.0.1:1", "--certs", dir)
	g.Expect(err).To(MatchError(ContainSubstring(`"peer-url" not set`)))
}
