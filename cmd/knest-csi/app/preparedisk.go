package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// diskImageMode is disk.img's mode, as CDI makes it: the qemu user's and group's.
const diskImageMode = 0o660

type prepareDiskFlags struct {
	file string
	size int64
}

// newPrepareDiskCommand is what the controller's prep pods run (see
// pkg/csi/controller's prep.go): it makes KubeVirt's disk image on a Filesystem
// PVC before the PVC is hot-plugged.
func newPrepareDiskCommand(logs io.Writer) *cobra.Command {
	f := &prepareDiskFlags{}
	cmd := &cobra.Command{
		Use:   "prepare-disk",
		Short: "Make a sparse disk image file for KubeVirt (run by the controller's prep pods)",
		Long: "Makes --file, sparse, of --size bytes, mode 0660, and syncs it, as CDI makes\n" +
			"disk.img on a Filesystem PVC for KubeVirt. A file that exists is kept: never\n" +
			"shrunk or overwritten, only grown when smaller than --size (what an interrupted\n" +
			"earlier run leaves).",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if f.file == "" || f.size <= 0 {
				return errors.New("--file and a positive --size are required")
			}
			msg, err := PrepareDisk(f.file, f.size)
			if err != nil {
				return err
			}
			fmt.Fprintln(logs, msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.file, "file", "", "The disk image file to make (required)")
	cmd.Flags().Int64Var(&f.size, "size", 0, "Its size in bytes (required)")
	return cmd
}

// PrepareDisk makes sure path is a regular file of at least size bytes: it creates
// it sparse (mode 0660) when absent and grows one that is smaller, never shrinking
// or rewriting what is there, and syncs the file and its directory. It returns what
// it did.
func PrepareDisk(path string, size int64) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("failed to stat %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s exists and is no regular file (%s)", path, fi.Mode().Type())
	case fi.Size() >= size:
		return fmt.Sprintf("%s exists with %d bytes; kept", path, fi.Size()), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, diskImageMode)
	if err != nil {
		return "", fmt.Errorf("failed to create %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	// The umask may have taken bits off.
	if err := f.Chmod(diskImageMode); err != nil {
		return "", fmt.Errorf("failed to set the mode of %s: %w", path, err)
	}
	// Opened without O_TRUNC, and only ever made longer: what is written stays.
	fi, err = f.Stat()
	if err != nil {
		return "", fmt.Errorf("failed to stat %s: %w", path, err)
	}
	what := fmt.Sprintf("kept %s with %d bytes", path, fi.Size())
	if fi.Size() < size {
		if err := f.Truncate(size); err != nil {
			return "", fmt.Errorf("failed to size %s to %d bytes: %w", path, size, err)
		}
		what = fmt.Sprintf("made %s sparse, %d bytes (from %d)", path, size, fi.Size())
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("failed to sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("failed to close %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return what, nil
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", dir, err)
	}
	return nil
}
