package etcd

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/knest-dev/knest/internal/freeport"
	"github.com/knest-dev/knest/pkg/backup"
)

// startEtcd runs a real one-member etcd on dir as name and returns a client of it.
// With tlsDir, it serves its clients TLS with the certificates written there (a
// server certificate, and the client Secret's files a backup Job mounts), and
// requires a client certificate of its CA.
func startEtcd(t *testing.T, dir, name string, peer url.URL, tlsDir string) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir, cfg.Name = dir, name
	cfg.LogOutputs = []string{"/dev/null"}
	client := freeport.URL(t)
	if tlsDir != "" {
		client.Scheme = "https"
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: filepath.Join(tlsDir, "server.crt"), KeyFile: filepath.Join(tlsDir, "server.key"),
			TrustedCAFile: filepath.Join(tlsDir, backup.CACertKey), ClientCertAuth: true,
		}
	}
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
	ccfg := clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if tlsDir != "" {
		if ccfg.TLS, err = clientTLS(tlsDir); err != nil {
			t.Fatal(err)
		}
	}
	c, err := clientv3.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// writeCerts writes into a new directory an etcd CA's certificate, a serving
// certificate for localhost (the name backup.ClientTLS checks) and the backup
// client's certificate Secret's files.
func writeCerts(t *testing.T) string {
	t.Helper()
	ca := &secret.Certificate{Purpose: secret.EtcdCA}
	if err := ca.Generate(); err != nil {
		t.Fatal(err)
	}
	serverCert, serverKey, err := backup.EtcdCA{Cert: ca.KeyPair.Cert, Key: ca.KeyPair.Key}.Sign(certs.Config{
		CommonName: "etcd", AltNames: certs.AltNames{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := backup.ClientCertificate(ca.KeyPair.Cert, ca.KeyPair.Key)
	if err != nil {
		t.Fatal(err)
	}
	files["server.crt"], files["server.key"] = serverCert, serverKey
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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

// snapshot and restore, as knest's Jobs run them: a snapshot of a real etcd that
// requires client certificates, taken with the client Secret's files, keeping the
// newest --keep; restored into a data directory the command makes, from which a new
// member starts with the object in it.
func TestSnapshotAndRestoreAsTheJobsRunThem(t *testing.T) {
	g := NewWithT(t)
	// The test's own calls: a refused handshake would otherwise wait for ever.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tlsDir := writeCerts(t)
	c := startEtcd(t, t.TempDir(), "a", freeport.URL(t), tlsDir)
	_, err := c.Put(ctx, "/registry/configmaps/default/kept", "v")
	g.Expect(err).NotTo(HaveOccurred())
	snapshots := t.TempDir()
	older := "20200101T000000Z.db"
	g.Expect(os.WriteFile(filepath.Join(snapshots, older), []byte("old"), 0o600)).To(Succeed())

	out, err := run(t, "snapshot", "--endpoint", c.Endpoints()[0], "--certs", tlsDir, "--dir", snapshots, "--keep", "1")
	g.Expect(err).NotTo(HaveOccurred())
	var r backup.Result
	g.Expect(json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
	g.Expect(r.SizeBytes).To(BeNumerically(">", 0))
	g.Expect(r.Snapshots).To(Equal([]string{r.Name}), "the older snapshot pruned")
	g.Expect(filepath.Join(snapshots, older)).NotTo(BeAnExistingFile())

	data := filepath.Join(t.TempDir(), "etcd")
	peer := freeport.URL(t)
	out, err = run(t, "restore", "--snapshot", filepath.Join(snapshots, r.Name), "--data-dir", data, "--name", "b", "--peer-url", peer.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("restored " + r.Name + " as member b\n"))

	restored, err := startEtcd(t, data, "b", peer, "").Get(ctx, "/registry/configmaps/default/kept")
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
