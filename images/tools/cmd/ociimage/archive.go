package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// containerDisk is a KubeVirt containerDisk: the disk alone under /disk/, owned by
// the qemu user (107) KubeVirt runs as.
func containerDisk(disk string) (v1.Image, error) {
	l, err := newLayer([]entry{{src: disk, dst: "/disk/" + filepath.Base(disk), mode: 0o440}}, 107, 107)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base(), l)
	if err != nil {
		return nil, err
	}
	return configure(img, v1.Config{})
}

// kernelBoot is the image KubeVirt's kernelBoot.container reads the kernel and
// initrd from (kernelPath /boot/vmlinuz, initrdPath /boot/initrd.img).
func kernelBoot(kernel, initrd string) (v1.Image, error) {
	l, err := newLayer([]entry{
		{src: kernel, dst: "/boot/vmlinuz", mode: 0o444},
		{src: initrd, dst: "/boot/initrd.img", mode: 0o444},
	}, 107, 107)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base(), l)
	if err != nil {
		return nil, err
	}
	return configure(img, v1.Config{})
}

// writeArchive writes the images as one OCI image layout and tars it to out. The
// archive appears under its final name only once complete.
func writeArchive(out string, imgs []namedImage) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, ni := range imgs {
		ref, err := name.NewTag(ni.ref, name.WeakValidation)
		if err != nil {
			return fmt.Errorf("bad image reference %q: %w", ni.ref, err)
		}
		full := ref.Name()
		if err := p.AppendImage(ni.img, layout.WithAnnotations(map[string]string{
			"io.containerd.image.name":          full,
			"org.opencontainers.image.ref.name": ref.TagStr(),
		})); err != nil {
			return fmt.Errorf("failed to write image %s: %w", full, err)
		}
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			if _, err := io.Copy(tw, src); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to archive %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
