package standin

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestResolveImagePrefersTheVersionLinkThenTheNewest(t *testing.T) {
	root := t.TempDir()
	write := func(dir, manifest string, age time.Duration) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, dir, "manifest.json")
		if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	const m = `{"image":"knest/node:v1.34.3","kernelImage":"knest/node-kernel:v1.34.3","kernelArgs":"console=ttyS0"}`
	write("v1.34.3-old", m, 2*time.Hour)
	write("v1.34.3-new", m, time.Hour)
	write("v1.33.1-x", `{"image":"knest/node:v1.33.1"}`, 0)

	img, err := resolveImage(root, "knest/node:v1.34.3")
	if err != nil || filepath.Base(img.Dir) != "v1.34.3-new" || img.KernelArgs != "console=ttyS0" {
		t.Fatalf("without a version link: got %+v, %v; want the newest build", img, err)
	}
	if err := os.Symlink("v1.34.3-old", filepath.Join(root, "v1.34.3")); err != nil {
		t.Fatal(err)
	}
	img, err = resolveImage(root, "knest/node-kernel:v1.34.3")
	if err != nil || filepath.Base(img.Dir) != "v1.34.3-old" {
		t.Fatalf("with out/v1.34.3 -> v1.34.3-old: got %+v, %v; want the linked build", img, err)
	}
	if _, err := resolveImage(root, "knest/node:v1.30.0"); err == nil {
		t.Fatal("an unknown reference resolved")
	}
}
