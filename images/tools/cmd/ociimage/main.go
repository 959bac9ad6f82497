// Command ociimage writes OCI image archives (a tar of an OCI image layout) without a
// container engine, using github.com/google/go-containerregistry:
//
//	ociimage containers -spec images.json -out images.tar
//	ociimage containerdisk -ref knest/node:v1.34.3 -disk disk.qcow2 -out node.tar
//	ociimage kernelboot -ref knest/node-kernel:v1.34.3 -kernel vmlinuz -initrd initrd.img -out kernel.tar
//
// Each image in an archive is annotated with its full reference
// (io.containerd.image.name) and its tag (org.opencontainers.image.ref.name), so
// `ctr images import`, skopeo (oci-archive:) and crane/oras (after untar) name it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ERROR:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: ociimage containers|containerdisk|kernelboot [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("out", "", "archive to write")
	switch args[0] {
	case "containers":
		spec := fs.String("spec", "", "JSON file describing the images")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *spec == "" || *out == "" {
			return errors.New("containers needs -spec and -out")
		}
		s, err := readSpec(*spec)
		if err != nil {
			return err
		}
		imgs, err := s.build()
		if err != nil {
			return err
		}
		return writeArchive(*out, imgs)
	case "containerdisk":
		ref := fs.String("ref", "", "image reference")
		disk := fs.String("disk", "", "disk image (qcow2 or raw) to place under /disk/")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *ref == "" || *disk == "" || *out == "" {
			return errors.New("containerdisk needs -ref, -disk and -out")
		}
		img, err := containerDisk(*disk)
		if err != nil {
			return err
		}
		return writeArchive(*out, []namedImage{{ref: *ref, img: img}})
	case "kernelboot":
		ref := fs.String("ref", "", "image reference")
		kernel := fs.String("kernel", "", "kernel to place at /boot/vmlinuz")
		initrd := fs.String("initrd", "", "initrd to place at /boot/initrd.img")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *ref == "" || *kernel == "" || *initrd == "" || *out == "" {
			return errors.New("kernelboot needs -ref, -kernel, -initrd and -out")
		}
		img, err := kernelBoot(*kernel, *initrd)
		if err != nil {
			return err
		}
		return writeArchive(*out, []namedImage{{ref: *ref, img: img}})
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}
