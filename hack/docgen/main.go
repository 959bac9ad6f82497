// docgen writes docs/api.md from the CRDs in config/crd/bases and docs/cli.md from
// the knest command tree. `make docs` runs it; its test fails when the committed
// copies differ from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// generated is what each output file is made from, relative to the repository root.
type generated struct {
	path   string
	render func(root string) ([]byte, error)
}

var outputs = []generated{
	{"docs/api.md", func(root string) ([]byte, error) { return apiDoc(filepath.Join(root, "config/crd/bases")) }},
	{"docs/cli.md", func(string) ([]byte, error) { return cliDoc(newRootCommand()) }},
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	for _, o := range outputs {
		data, err := o.render(*root)
		if err != nil {
			fmt.Fprintf(os.Stderr, "docgen: %s: %v\n", o.path, err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.Join(*root, o.path), data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "docgen: %v\n", err)
			os.Exit(1)
		}
	}
}
