package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// nodeImage is one output of `make node-image`: where KubeVirt would pull a
// containerDisk or a kernel-boot image, the stand-in uses these files.
type nodeImage struct {
	Dir         string
	Image       string `json:"image"`
	KernelImage string `json:"kernelImage"`
	KernelArgs  string `json:"kernelArgs"`
}

func (i nodeImage) disk() string   { return filepath.Join(i.Dir, "disk.qcow2") }
func (i nodeImage) kernel() string { return filepath.Join(i.Dir, "vmlinuz") }
func (i nodeImage) initrd() string { return filepath.Join(i.Dir, "initrd.img") }

// resolveImage finds the node image whose manifest names ref as its containerDisk or
// kernel-boot image, among the directories under root (`make node-image`'s out/).
// Several builds can name the same reference: the one `out/<version>` points to (the
// newest complete build) wins, then the most recently built. The directory is
// resolved through symlinks, so a later rebuild does not change the backing file of
// a running VM.
func resolveImage(root, ref string) (nodeImage, error) {
	manifests, err := filepath.Glob(filepath.Join(root, "*", "manifest.json"))
	if err != nil {
		return nodeImage{}, err
	}
	var best nodeImage
	var bestLink bool
	var bestTime time.Time
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var img nodeImage
		if json.Unmarshal(b, &img) != nil || (img.Image != ref && img.KernelImage != ref) {
			continue
		}
		fi, err := os.Lstat(filepath.Dir(m))
		if err != nil {
			continue
		}
		link := fi.Mode()&os.ModeSymlink != 0
		st, err := os.Stat(m)
		if err != nil {
			continue
		}
		if best.Dir != "" && (bestLink && !link || bestLink == link && !st.ModTime().After(bestTime)) {
			continue
		}
		if img.Dir, err = filepath.EvalSymlinks(filepath.Dir(m)); err != nil {
			continue
		}
		best, bestLink, bestTime = img, link, st.ModTime()
	}
	if best.Dir == "" {
		return nodeImage{}, fmt.Errorf("no node image for %q under %s (build it with `make node-image`)", ref, root)
	}
	return best, nil
}
