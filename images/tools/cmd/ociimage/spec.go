package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// spec describes the container images of one archive.
type spec struct {
	Images []imageSpec `json:"images"`
}

type imageSpec struct {
	Ref        string      `json:"ref"`
	Layers     []layerSpec `json:"layers"`
	Entrypoint []string    `json:"entrypoint,omitempty"`
	Cmd        []string    `json:"cmd,omitempty"`
	Env        []string    `json:"env,omitempty"`
	User       string      `json:"user,omitempty"`
	WorkingDir string      `json:"workingDir,omitempty"`
}

// layerSpec is one layer: single files and whole directory trees. Identical layer
// specs produce identical digests, so layers shared between images are stored once.
type layerSpec struct {
	Files []fileSpec `json:"files,omitempty"`
	Trees []treeSpec `json:"trees,omitempty"`
	// Tarball is a tar file taken as the layer as it is (owners, setuid bits and
	// extended attributes kept), e.g. a Debian root filesystem from mmdebstrap. A
	// layer is either a tarball or files and trees.
	Tarball string `json:"tarball,omitempty"`
}

type fileSpec struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	// Mode is octal ("0755"); empty keeps the source's permission bits.
	Mode string `json:"mode,omitempty"`
}

// treeSpec copies the directory Src (files, directories and symlinks) to Dst.
type treeSpec struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

func readSpec(path string) (*spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return &s, nil
}

type namedImage struct {
	ref string
	img v1.Image
}

func (s *spec) build() ([]namedImage, error) {
	var out []namedImage
	for _, is := range s.Images {
		img, err := is.build()
		if err != nil {
			return nil, fmt.Errorf("failed to build image %s: %w", is.Ref, err)
		}
		out = append(out, namedImage{ref: is.Ref, img: img})
	}
	return out, nil
}

func (is imageSpec) build() (v1.Image, error) {
	var layers []v1.Layer
	for _, ls := range is.Layers {
		if ls.Tarball != "" {
			if len(ls.Files) > 0 || len(ls.Trees) > 0 {
				return nil, fmt.Errorf("layer %s: a tarball layer has no files or trees", ls.Tarball)
			}
			l, err := tarballLayer(ls.Tarball)
			if err != nil {
				return nil, err
			}
			layers = append(layers, l)
			continue
		}
		var entries []entry
		for _, f := range ls.Files {
			var mode int64 = -1
			if f.Mode != "" {
				m, err := strconv.ParseInt(f.Mode, 8, 32)
				if err != nil {
					return nil, fmt.Errorf("bad mode %q for %s: %w", f.Mode, f.Dst, err)
				}
				mode = m
			}
			entries = append(entries, entry{src: f.Src, dst: f.Dst, mode: mode})
		}
		for _, t := range ls.Trees {
			te, err := treeEntries(t.Src, t.Dst)
			if err != nil {
				return nil, err
			}
			entries = append(entries, te...)
		}
		l, err := newLayer(entries, 0, 0)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(base(), layers...)
	if err != nil {
		return nil, err
	}
	env := is.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	return configure(img, v1.Config{
		Entrypoint: is.Entrypoint,
		Cmd:        is.Cmd,
		Env:        env,
		User:       is.User,
		WorkingDir: is.WorkingDir,
	})
}
