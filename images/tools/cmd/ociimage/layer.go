package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symlink of a layer. mode < 0 keeps the source's
// permission bits.
type entry struct {
	src  string
	dst  string
	mode int64
}

// treeEntries lists the directory src as entries rooted at dst.
func treeEntries(src, dst string) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		out = append(out, entry{src: p, dst: path.Join(dst, filepath.ToSlash(rel)), mode: -1})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read tree %s: %w", src, err)
	}
	return out, nil
}

// newLayer returns a gzip-compressed layer of the entries, owned by uid:gid, with
// parent directories added and every timestamp at the epoch, so equal inputs give
// equal digests. The tar is generated on each open, never buffered whole.
func newLayer(entries []entry, uid, gid int) (v1.Layer, error) {
	norm := map[string]entry{}
	for _, e := range entries {
		dst := strings.TrimPrefix(path.Clean("/"+e.dst), "/")
		if dst == "" {
			continue
		}
		if _, err := os.Lstat(e.src); err != nil {
			return nil, fmt.Errorf("missing layer input: %w", err)
		}
		e.dst = dst
		norm[dst] = e
		for dir := path.Dir(dst); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if _, ok := norm[dir]; !ok {
				norm[dir] = entry{dst: dir, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(norm))
	for n := range norm {
		names = append(names, n)
	}
	sort.Strings(names)

	opener := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(writeTar(pw, names, norm, uid, gid))
		}()
		return pr, nil
	}
	return tarball.LayerFromOpener(opener, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
}

func writeTar(w io.Writer, names []string, entries map[string]entry, uid, gid int) error {
	tw := tar.NewWriter(w)
	for _, name := range names {
		e := entries[name]
		hdr := &tar.Header{Name: name, Uid: uid, Gid: gid, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		var fi os.FileInfo
		if e.src != "" {
			var err error
			if fi, err = os.Lstat(e.src); err != nil {
				return err
			}
		}
		switch {
		case fi == nil || fi.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			hdr.Mode = 0o755
			if fi != nil {
				hdr.Mode = int64(fi.Mode().Perm())
			}
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(e.src)
			if err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = target
			hdr.Mode = 0o777
		case fi.Mode().IsRegular():
			hdr.Typeflag = tar.TypeReg
			hdr.Size = fi.Size()
			hdr.Mode = int64(fi.Mode().Perm())
		default:
			return fmt.Errorf("%s: unsupported file type %v", e.src, fi.Mode().Type())
		}
		if e.mode >= 0 {
			hdr.Mode = e.mode
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("failed to copy %s: %w", e.src, err)
			}
		}
	}
	return tw.Close()
}

// base is the empty image with OCI media types.
func base() v1.Image {
	return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
}

// configure sets the image config for linux/amd64 with no creation time.
func configure(img v1.Image, cfg v1.Config) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// tarballLayer is the tar file at path as an OCI layer.
func tarballLayer(path string) (v1.Layer, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("missing layer input: %w", err)
	}
	return tarball.LayerFromFile(path, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
}
