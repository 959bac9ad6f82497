package kubeconfig

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckOutputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "existing")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{name: "new file", path: filepath.Join(dir, "demo.kubeconfig")},
		{name: "existing file", path: file},
		{name: "a directory", path: dir, want: dir + " is a directory; name a file in it, e.g. " + filepath.Join(dir, "kubeconfig")},
		{name: "missing directory", path: filepath.Join(dir, "nope", "demo"), want: "the directory " + filepath.Join(dir, "nope") + " of " + filepath.Join(dir, "nope", "demo") + " does not exist; create it first"},
		{name: "parent is a file", path: filepath.Join(file, "demo"), want: file + " is not a directory"},
		{name: "empty", path: "", want: "the path is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckOutputFile(tt.path)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestCheckOutputFileNotWritable(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "ro")
	g.Expect(os.Mkdir(dir, 0o500)).To(Succeed())
	if os.Geteuid() == 0 {
		// Root writes to a mode 0500 directory; not even root creates files in sysfs.
		dir = "/sys"
	}
	err := CheckOutputFile(filepath.Join(dir, "demo"))
	g.Expect(err).To(MatchError(ContainSubstring("cannot create files in the directory " + dir + " (permission denied)")))
}

func TestWriteFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.kubeconfig")
	g.Expect(WriteFile(path, []byte("data"))).To(Succeed())
	fi, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no temporary files left behind")

	g.Expect(WriteFile(dir, []byte("data"))).To(MatchError(ContainSubstring(dir + " is a directory")))
}
