package providers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// readYAMLDocs returns the non-empty documents of a YAML file, as JSON.
func readYAMLDocs(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(j) != "null" {
			docs = append(docs, j)
		}
	}
}

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
