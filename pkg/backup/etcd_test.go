package backup

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/knest-dev/knest/internal/freeport"
)

// startEtcd runs a real one-member etcd on dir, as name with peer URL peer (a
// restored member must start under the identity it was restored as).
func startEtcd(t *testing.T, dir, name string, peer url.URL) (*clientv3.Client, func()) {
	t.Helper()
	e, client := startMember(t, dir, name, peer, "")
	ready(t, e)
	return connect(t, client, e)
}

// startMember starts a member of initialCluster (empty: name alone) without
// waiting for it: a member of several is ready only with a quorum. opts change
// its configuration further.
func startMember(t *testing.T, dir, name string, peer url.URL, initialCluster string, opts ...func(*embed.Config)) (*embed.Etcd, url.URL) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir, cfg.Name = dir, name
	cfg.LogOutputs = []string{"/dev/null"}
	client := freeport.URL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = name + "=" + peer.String()
	if initialCluster != "" {
		cfg.InitialCluster = initialCluster
	}
	for _, o := range opts {
		o(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, client
}

// threeMembers are the identities of a three-member cluster on free local ports,
// and its initial cluster.
func threeMembers(t *testing.T) ([]Member, []url.URL, string) {
	t.Helper()
	members := make([]Member, 3)
	peers := make([]url.URL, 3)
	for i := range members {
		peers[i] = freeport.URL(t)
		members[i] = Member{Name: fmt.Sprintf("m-%d", i), PeerURL: peers[i].String()}
	}
	return members, peers, InitialCluster(members...)
}

func ready(t *testing.T, e *embed.Etcd) {
	t.Helper()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd did not start")
	}
}

func connect(t *testing.T, client url.URL, e *embed.Etcd) (*clientv3.Client, func()) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() { _ = c.Close(); e.Close() }
}

func TestSnapshotRestoresTheObjectsItTookAndNothingLater(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	peer := freeport.URL(t)
	c, stop := startEtcd(t, t.TempDir(), "a", peer)
	for i := range 3 {
		_, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/default/kept-%d", i), "v")
		g.Expect(err).NotTo(HaveOccurred())
	}
	backups := t.TempDir()
	taken := time.Date(2026, 11, 27, 9, 15, 0, 0, time.UTC)
	r, err := Save(ctx, zap.NewNop(), c.Endpoints(), nil, backups, taken)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Name).To(Equal("20261127T091500Z.db"))
	g.Expect(r.Revision).To(BeNumerically(">=", 4))
	g.Expect(r.SizeBytes).To(BeNumerically(">", 0))
	_, err = c.Put(ctx, "/registry/configmaps/default/later", "v")
	g.Expect(err).NotTo(HaveOccurred())
	stop()

	// Restored over a data directory that has other data: it is replaced.
	data := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(data, "member", "wal"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(data, "member", "wal", "stale.wal"), []byte("x"), 0o600)).To(Succeed())
	peer2 := freeport.URL(t)
	g.Expect(Restore(zap.NewNop(), filepath.Join(backups, r.Name), data, Member{Name: "b", PeerURL: peer2.String()}, "")).To(Succeed())
	g.Expect(filepath.Join(data, "member", "wal", "stale.wal")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(data, "knest-restore")).NotTo(BeAnExistingFile())

	// Given to a hosted etcd's user, every file of the member (this test runs as
	// root in CI; another user can give files only to itself).
	owner := NonRootUser
	if os.Geteuid() != 0 {
		owner = os.Geteuid()
	}
	g.Expect(GiveMember(data, owner, owner)).To(Succeed())
	g.Expect(filepath.WalkDir(filepath.Join(data, "member"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != owner || int(sys.Gid) != owner {
			return fmt.Errorf("%s belongs to %d:%d", p, sys.Uid, sys.Gid)
		}
		return nil
	})).To(Succeed())

	c2, stop2 := startEtcd(t, data, "b", peer2)
	defer stop2()
	got, err := c2.Get(ctx, "/registry/configmaps/default/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	g.Expect(err).NotTo(HaveOccurred())
	var keys []string
	for _, kv := range got.Kvs {
		keys = append(keys, string(kv.Key))
	}
	g.Expect(keys).To(ConsistOf("/registry/configmaps/default/kept-0", "/registry/configmaps/default/kept-1", "/registry/configmaps/default/kept-2"))
	// Watchers that knew the old revisions are told to list again.
	g.Expect(got.Header.Revision).To(BeNumerically(">", revisionBump))
	_, err = c2.Get(ctx, "/registry/configmaps/default/kept-0", clientv3.WithRev(r.Revision))
	g.Expect(err).To(MatchError(ContainSubstring("compacted")))
}

// Three members restored from one snapshot, each into its own directory with the
// same initial cluster, start as one cluster: each has the snapshot's objects, and
// a write to one is read from another.
func TestRestoreMakesAThreeMemberCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, stop := startEtcd(t, t.TempDir(), "a", freeport.URL(t))
	_, err := c.Put(ctx, "/registry/configmaps/default/kept", "v")
	g.Expect(err).NotTo(HaveOccurred())
	backups := t.TempDir()
	r, err := Save(ctx, zap.NewNop(), c.Endpoints(), nil, backups, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	stop()

	members, peers, initial := threeMembers(t)
	clients := make([]*clientv3.Client, 3)
	etcds := make([]*embed.Etcd, 3)
	urls := make([]url.URL, 3)
	for i, m := range members {
		data := t.TempDir()
		g.Expect(Restore(zap.NewNop(), filepath.Join(backups, r.Name), data, m, initial)).To(Succeed())
		etcds[i], urls[i] = startMember(t, data, m.Name, peers[i], initial)
	}
	for i := range etcds {
		ready(t, etcds[i])
		var stop func()
		clients[i], stop = connect(t, urls[i], etcds[i])
		defer stop()
	}
	list, err := clients[0].MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(3))
	for _, cl := range clients {
		got, err := cl.Get(ctx, "/registry/configmaps/default/kept")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Kvs).To(HaveLen(1))
	}
	_, err = clients[1].Put(ctx, "/registry/configmaps/default/after", "v")
	g.Expect(err).NotTo(HaveOccurred())
	got, err := clients[2].Get(ctx, "/registry/configmaps/default/after")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Kvs).To(HaveLen(1))
}

func TestSaveLeavesNoSnapshotWhenEtcdDoesNotAnswer(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	dead := freeport.URL(t)
	_, err := Save(ctx, zap.NewNop(), []string{dead.String()}, nil, dir, time.Now())
	g.Expect(err).To(HaveOccurred())
	g.Expect(os.ReadDir(dir)).To(BeEmpty())
}

func TestPruneKeepsTheNewestAndRemovesParts(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, n := range []string{"20261127T090000Z.db", "20261127T100000Z.db", "20261126T230000Z.db", "20261127T110000Z.db.part", "notes.txt"} {
		g.Expect(os.WriteFile(filepath.Join(dir, n), nil, 0o600)).To(Succeed())
	}
	left, err := Prune(dir, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(Equal([]string{"20261127T090000Z.db", "20261127T100000Z.db"}))
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf("20261127T090000Z.db", "20261127T100000Z.db", "notes.txt"))
}

func TestSnapshotNamesAreOnlyKnestsOwn(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ValidSnapshotName(SnapshotName(time.Now()))).To(BeTrue())
	for _, n := range []string{"", "../etc/passwd", "20261127T091500Z.db/../x", "x.db", "20261127T091500Z"} {
		g.Expect(ValidSnapshotName(n)).To(BeFalse(), n)
	}
}

func TestResultMessageFitsTheTerminationLog(t *testing.T) {
	g := NewWithT(t)
	r := Result{Name: "20261127T091500Z.db", TakenAt: time.Now().UTC()}
	for i := range 500 {
		r.Snapshots = append(r.Snapshots, SnapshotName(time.Unix(int64(i)*3600, 0)))
	}
	msg := r.Message()
	g.Expect(len(msg)).To(BeNumerically("<=", 4000))
	back, err := ParseResult(msg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Snapshots[len(back.Snapshots)-1]).To(Equal(r.Snapshots[499]), "the newest are kept")
	_, err = ParseResult("Error: boom")
	g.Expect(err).To(HaveOccurred())
}

func TestWriteDiskImageLeavesATarTheGuestFindsAtTheDisksSize(t *testing.T) {
	g := NewWithT(t)
	data := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(data, "member", "snap"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(data, "member", "snap", "db"), []byte("bolt"), 0o600)).To(Succeed())
	disk := filepath.Join(t.TempDir(), DiskImage)
	const size = 64 << 20
	g.Expect(os.WriteFile(disk, []byte("old file system"), 0o660)).To(Succeed())
	g.Expect(os.Truncate(disk, size)).To(Succeed())
	g.Expect(os.Chmod(disk, 0o660)).To(Succeed())

	g.Expect(WriteDiskImage(data, disk)).To(Succeed())
	st, err := os.Stat(disk)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Size()).To(BeEquivalentTo(size))
	g.Expect(st.Mode().Perm()).To(BeEquivalentTo(0o660))
	f, err := os.Open(disk)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	contents := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		names = append(names, h.Name)
		b, _ := io.ReadAll(tr)
		contents[h.Name] = string(b)
	}
	g.Expect(names[0]).To(Equal(DiskTarPrefix), "the guest's script reads the first entry")
	g.Expect(names).To(ContainElement(DiskTarPrefix + "member/snap/"))
	g.Expect(contents[DiskTarPrefix+"member/snap/db"]).To(Equal("bolt"))
	for _, n := range names {
		g.Expect(strings.HasPrefix(n, DiskTarPrefix)).To(BeTrue())
	}
	g.Expect(WriteDiskImage(data, filepath.Join(t.TempDir(), "missing.img"))).To(MatchError(ContainSubstring("no image")))
}

func TestDefragmentGivesFreePagesBackOnlyPastTheThreshold(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, stop := startEtcd(t, t.TempDir(), "a", freeport.URL(t))
	defer stop()
	value := strings.Repeat("x", 64<<10)
	var rev int64
	for i := range 64 { // 4 MiB, then deleted and compacted: free pages in the file
		resp, err := c.Put(ctx, fmt.Sprintf("/registry/secrets/default/s-%d", i), value)
		g.Expect(err).NotTo(HaveOccurred())
		rev = resp.Header.Revision
	}
	del, err := c.Delete(ctx, "/registry/secrets/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(BeNumerically(">", 0))
	// bbolt keeps the pages the compaction freed pending until a later write
	// transaction releases them, and etcd commits its backend only when something was
	// written (every 100 ms, later on a busy machine): so write, as a live tenant's
	// leases and events do, until etcd counts them free.
	g.Eventually(func(g Gomega) {
		_, err := c.Put(ctx, "/registry/events/default/tick", "x")
		g.Expect(err).NotTo(HaveOccurred())
		st, err := c.Status(ctx, c.Endpoints()[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.DbSizeInUse).To(BeNumerically("<", st.DbSize/2))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	done, err := defragment(ctx, zap.NewNop(), c.Endpoints(), nil, 1<<30, 0.5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeEmpty(), "below the threshold nothing is touched")

	done, err = defragment(ctx, zap.NewNop(), c.Endpoints(), nil, 1<<20, 0.5)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(HaveLen(1))
	g.Expect(done[0].Member).To(Equal("a"))
	g.Expect(done[0].AfterBytes).To(BeNumerically("<", done[0].BeforeBytes/2))
}
