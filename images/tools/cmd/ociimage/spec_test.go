package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"
)

// A tarball layer keeps what a files layer cannot express: owners and setuid bits.
func TestTarballLayerKeepsOwnersAndModes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "rootfs.tar")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	body := []byte("qemu")
	if err := tw.WriteHeader(&tar.Header{Name: "usr/bin/helper", Mode: 0o4755, Uid: 107, Gid: 107, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	img, err := imageSpec{Ref: "knest.local/t:1", Layers: []layerSpec{{Tarball: src}}}.build()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hdr, err := tar.NewReader(rc).Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "usr/bin/helper" || hdr.Uid != 107 || hdr.Gid != 107 || hdr.Mode != 0o4755 {
		t.Fatalf("got %s uid %d gid %d mode %o, want usr/bin/helper 107 107 4755", hdr.Name, hdr.Uid, hdr.Gid, hdr.Mode)
	}

	if _, err := (imageSpec{Layers: []layerSpec{{Tarball: src, Files: []fileSpec{{Src: src, Dst: "/x"}}}}}).build(); err == nil {
		t.Fatal("a layer with a tarball and files must be refused")
	}
}
