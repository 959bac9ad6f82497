package providers

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// kustomizePatches returns the patch files a kustomization applies (patches[].path
// and patchesStrategicMerge), relative to its directory.
func kustomizePatches(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k struct {
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
		PatchesStrategicMerge []string `json:"patchesStrategicMerge"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	var out []string
	for _, p := range k.Patches {
		if p.Path != "" {
			out = append(out, p.Path)
		}
	}
	return append(out, k.PatchesStrategicMerge...), nil
}
