package app_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/knest-dev/knest/cmd/knest-csi/app"
)

// allocated is the bytes path takes on disk.
func allocated(g Gomega, path string) int64 {
	fi, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestPrepareDisk(t *testing.T) {
	g := NewWithT(t)
	const size = int64(900) << 20
	path := filepath.Join(t.TempDir(), "disk.img")

	// Made sparse, 0660, whatever the umask.
	old := syscall.Umask(0o077)
	_, err := app.PrepareDisk(path, size)
	syscall.Umask(old)
	g.Expect(err).NotTo(HaveOccurred())
	fi, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Size()).To(Equal(size))
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o660)))
	g.Expect(allocated(g, path)).To(BeNumerically("<", 1<<20), "sparse")

	// Written to (as by the guest), then prepared again, smaller or the same: kept.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteAt([]byte("ext4 superblock"), 1024)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
	for _, s := range []int64{size, size / 2, 1} {
		msg, err := app.PrepareDisk(path, s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(msg).To(ContainSubstring("kept"))
		fi, err := os.Stat(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Size()).To(Equal(size), "never shrunk")
	}

	// Larger (a run cut short left it smaller): grown, what it holds kept.
	_, err = app.PrepareDisk(path, 2*size)
	g.Expect(err).NotTo(HaveOccurred())
	fi, err = os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Size()).To(Equal(2 * size))
	f, err = os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	head := make([]byte, 15)
	_, err = f.ReadAt(head, 1024)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(head)).To(Equal("ext4 superblock"))
	g.Expect(allocated(g, path)).To(BeNumerically("<", 1<<20), "still sparse")

	// Not a file: refused.
	_, err = app.PrepareDisk(t.TempDir(), size)
	g.Expect(err).To(MatchError(ContainSubstring("no regular file")))
}

// TestPrepareDiskCommand runs it as a prep pod does.
func TestPrepareDiskCommand(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "disk.img")
	logs := &syncBuffer{}
	g.Expect(app.Run(context.Background(), logs, []string{"prepare-disk", "--file", path, "--size", "1048576"})).To(Succeed())
	fi, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Size()).To(Equal(int64(1 << 20)))
	g.Expect(logs.String()).To(ContainSubstring("made " + path + " sparse"))

	for _, args := range [][]string{{"prepare-disk", "--file", path}, {"prepare-disk", "--size", "1"}, {"prepare-disk", "--file", path, "--size", "-1"}} {
		g.Expect(app.Run(context.Background(), &syncBuffer{}, args)).To(MatchError(ContainSubstring("required")), "%v", args)
	}
}
