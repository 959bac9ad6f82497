package backup

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/knest-dev/knest/pkg/podsec"
)

// snapshotSuffix ends every snapshot file; a file being written ends in partSuffix.
const (
	snapshotSuffix = ".db"
	partSuffix     = ".part"
	timeLayout     = "20060102T150405Z"
)

// SnapshotName is the file name of a snapshot taken at t: sortable, UTC.
func SnapshotName(t time.Time) string { return t.UTC().Format(timeLayout) + snapshotSuffix }

// ValidSnapshotName tells a name SnapshotName could have made (so that a name from
// the CLI or an annotation never reaches a path outside the backup volume).
func ValidSnapshotName(name string) bool {
	_, err := time.Parse(timeLayout+snapshotSuffix, name)
	return err == nil
}

// Result is what a backup Job reports in its termination message.
type Result struct {
	Name      string    `json:"name"`
	TakenAt   time.Time `json:"takenAt"`
	Revision  int64     `json:"revision"`
	SizeBytes int64     `json:"sizeBytes"`
	// Snapshots on the volume after pruning, oldest first.
	Snapshots []string `json:"snapshots"`
	// Defragmented are the members defragmented after the snapshot.
	Defragmented []Defragmented `json:"defragmented,omitempty"`
	// DefragError is why defragmenting failed; the snapshot stands.
	DefragError string `json:"defragError,omitempty"`
}

// Message is r as a termination message; kubelet keeps 4096 bytes of it, so the
// list is cut from the oldest end to fit.
func (r Result) Message() string {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return err.Error()
		}
		if len(b) <= 4000 || len(r.Snapshots) == 0 {
			return string(b)
		}
		r.Snapshots = r.Snapshots[1:]
	}
}

// ParseResult reads a termination message.
func ParseResult(msg string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return Result{}, fmt.Errorf("backup Job reported %q: %w", msg, err)
	}
	if !ValidSnapshotName(r.Name) {
		return Result{}, fmt.Errorf("backup Job reported a snapshot named %q", r.Name)
	}
	return r, nil
}

// Save takes a snapshot of etcd into dir with etcd's client v3 snapshot API,
// checks it with etcdutl (its hash, its revision), and only then gives it its
// name: a snapshot file on the volume is always a whole one.
func Save(ctx context.Context, lg *zap.Logger, endpoints []string, tlsConfig *tls.Config, dir string, now time.Time) (Result, error) {
	name := SnapshotName(now)
	part := filepath.Join(dir, name+partSuffix)
	cfg := clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 30 * time.Second, Logger: lg}
	if _, err := clientsnapshot.SaveWithVersion(ctx, lg, cfg, part); err != nil {
		_ = os.Remove(part)
		return Result{}, fmt.Errorf("failed to take a snapshot from %s: %w", strings.Join(endpoints, ","), err)
	}
	st, err := snapshot.NewV3(lg).Status(part)
	if err != nil {
		_ = os.Remove(part)
		return Result{}, fmt.Errorf("snapshot %s does not check out: %w", name, err)
	}
	if err := os.Rename(part, filepath.Join(dir, name)); err != nil {
		return Result{}, err
	}
	return Result{Name: name, TakenAt: now.UTC().Truncate(time.Second), Revision: st.Revision, SizeBytes: st.TotalSize}, nil
}

// Prune removes all but the newest keep snapshots, and parts left by a Job that
// died while writing one; it returns the snapshots left, oldest first.
func Prune(dir string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.HasSuffix(n, partSuffix):
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return nil, err
			}
		case ValidSnapshotName(n):
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for len(names) > keep {
		if err := os.Remove(filepath.Join(dir, names[0])); err != nil {
			return nil, err
		}
		names = names[1:]
	}
	return names, nil
}

// revisionBump moves the restored store's revision far past anything a client saw,
// and the old revisions are marked compacted: kube-apiserver's watches and caches
// then list again instead of waiting for revisions that went back in time (etcd's
// advice for restoring a Kubernetes store).
const revisionBump = 1_000_000_000

// Member is the etcd member a restore makes.
type Member struct {
	Name    string
	PeerURL string
}

// InitialCluster is etcd's --initial-cluster for members.
func InitialCluster(members ...Member) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// Restore makes member m's data directory from a snapshot with etcdutl, into
// dataDir/member: any member data there is replaced. initialCluster is every
// member's (InitialCluster), each restored from the same snapshot; empty means m
// alone. It restores beside the old data first, so a failure leaves it in place.
func Restore(lg *zap.Logger, snapshotPath, dataDir string, m Member, initialCluster string) error {
	if initialCluster == "" {
		initialCluster = InitialCluster(m)
	}
	staging := filepath.Join(dataDir, "knest-restore")
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	err := snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                m.Name,
		OutputDataDir:       staging,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      initialCluster,
		InitialClusterToken: "etcd-cluster",
		RevisionBump:        revisionBump,
		MarkCompacted:       true,
	})
	if err != nil {
		return fmt.Errorf("failed to restore %s: %w", filepath.Base(snapshotPath), err)
	}
	member := filepath.Join(dataDir, "member")
	if err := os.RemoveAll(member); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(staging, "member"), member); err != nil {
		return err
	}
	return os.RemoveAll(staging)
}

// NonRootUser is the uid and gid backups and a hosted etcd run as; a hosted etcd's
// data belongs to it.
const NonRootUser = podsec.NonRootUID

// GiveMember gives dataDir/member and everything in it to uid and gid: a restore
// runs as root, and etcd, running as NonRootUser, must open what it wrote.
func GiveMember(dataDir string, uid, gid int) error {
	return filepath.WalkDir(filepath.Join(dataDir, "member"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// DiskTarPrefix is the directory a restore archive holds; the guest's
// knest-etcd-disk script looks for it on the etcd disk (pkg/cluster/scripts).
const DiskTarPrefix = "knest-etcd-restore/"

// WriteDiskImage replaces a VM's etcd disk image (KubeVirt's disk.img on a
// filesystem-mode claim) with a tar archive of dataDir under DiskTarPrefix, at
// the image's size, owner and mode. The guest's script unpacks it onto a new file
// system at its next boot: a host Job can write a tar without privileges, where
// writing into the guest's ext4 would need a loop mount.
func WriteDiskImage(dataDir, image string) error {
	old, err := os.Stat(image)
	if err != nil {
		return fmt.Errorf("the etcd disk has no image to replace: %w", err)
	}
	tmp := image + ".knest-restore"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, old.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }()
	if err := writeTar(f, dataDir); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Sparse up to the disk's size: the guest makes its file system on all of it.
	if err := os.Truncate(tmp, old.Size()); err != nil {
		return err
	}
	if err := os.Chmod(tmp, old.Mode().Perm()); err != nil {
		return err
	}
	if st, ok := old.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(tmp, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	return os.Rename(tmp, image)
}

func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: DiskTarPrefix, Mode: 0o700}); err != nil {
		return err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = DiskTarPrefix + filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "root", "root"
		if d.IsDir() {
			h.Name += "/"
			return tw.WriteHeader(h)
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// Defragmentation thresholds: a member whose database file holds at least this much
// free space, and at least half its size, is defragmented. kube-apiserver compacts
// every 5 minutes, which frees pages but never shrinks the file; without this the
// file only grows towards the quota.
const (
	defragMinFree     = 64 << 20
	defragMinFreePart = 0.5
)

// Defragmented is what Defragment did to one member.
type Defragmented struct {
	Member      string `json:"member"`
	BeforeBytes int64  `json:"beforeBytes"`
	AfterBytes  int64  `json:"afterBytes"`
}

// Defragment defragments, one at a time, the members whose database is mostly
// free pages, reaching each at its own client URL (a defragmentation holds that
// member's writes, so the others keep quorum). It returns what it did.
func Defragment(ctx context.Context, lg *zap.Logger, endpoints []string, tlsConfig *tls.Config) ([]Defragmented, error) {
	return defragment(ctx, lg, endpoints, tlsConfig, defragMinFree, defragMinFreePart)
}

func defragment(ctx context.Context, lg *zap.Logger, endpoints []string, tlsConfig *tls.Config, minFree int64, minFreePart float64) ([]Defragmented, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 30 * time.Second, Logger: lg})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	members, err := c.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd's members: %w", err)
	}
	var done []Defragmented
	for _, m := range members.Members {
		if len(m.ClientURLs) == 0 {
			continue // a learner not started yet
		}
		url := m.ClientURLs[0]
		st, err := c.Status(ctx, url)
		if err != nil {
			return done, fmt.Errorf("failed to read member %s's status: %w", m.Name, err)
		}
		free := st.DbSize - st.DbSizeInUse
		if free < minFree || float64(free) < minFreePart*float64(st.DbSize) {
			continue
		}
		if _, err := c.Defragment(ctx, url); err != nil {
			return done, fmt.Errorf("failed to defragment member %s: %w", m.Name, err)
		}
		after, err := c.Status(ctx, url)
		if err != nil {
			return done, err
		}
		done = append(done, Defragmented{Member: m.Name, BeforeBytes: st.DbSize, AfterBytes: after.DbSize})
	}
	return done, nil
}
