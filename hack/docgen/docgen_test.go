package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is where `go test` runs this package from.
const repoRoot = "../.."

// TestDocsUpToDate fails when a generated doc differs from what `make docs` writes
// now: after a change to the CRDs or the commands, or an edit by hand.
func TestDocsUpToDate(t *testing.T) {
	// Another home than the one `make docs` ran with: a default built from it must
	// not show in the docs.
	t.Setenv("HOME", t.TempDir())
	for _, o := range outputs {
		t.Run(o.path, func(t *testing.T) {
			want, err := o.render(repoRoot)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(repoRoot, o.path))
			if err != nil {
				t.Fatalf("%v: run `make docs`", err)
			}
			if !bytes.Equal(got, want) {
				line, gotLine, wantLine := firstDiff(got, want)
				t.Fatalf("%s is stale: run `make docs` (and commit it).\nFirst difference, line %d:\n  committed: %q\n  generated: %q",
					o.path, line, gotLine, wantLine)
			}
		})
	}
}

func firstDiff(a, b []byte) (int, string, string) {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
}

// TestSynopsesMatchCLIDoc checks the short synopses in the README and the reference
// against docs/cli.md (which TestDocsUpToDate keeps true): every command they name
// exists, with every flag they give it.
func TestSynopsesMatchCLIDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	flags := parseCLIDoc(string(doc))
	if len(flags) < 10 || len(flags["knest"]) == 0 {
		t.Fatalf("docs/cli.md: found only %d commands; did its layout change?", len(flags))
	}
	for _, file := range []string{"README.md", "docs/reference.md"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil {
				t.Fatal(err)
			}
			lines, globals := synopsis(string(data))
			if len(lines) == 0 || len(globals) == 0 {
				t.Fatalf("no synopsis (a code block and a \"Globals\" line) under \"## The CLI\"")
			}
			for _, line := range lines {
				for _, alt := range alternatives(line) {
					path, named := commandLine(alt)
					known, ok := flags[path]
					if !ok {
						t.Errorf("%q: docs/cli.md has no command %q", line, path)
						continue
					}
					for _, f := range named {
						if !known[f] {
							t.Errorf("%q: docs/cli.md gives %q no flag %s", line, path, f)
						}
					}
				}
			}
			for _, f := range globals {
				if !flags["knest"][f] {
					t.Errorf("global flag %s is not a flag of knest in docs/cli.md", f)
				}
			}
		})
	}
}

var (
	backticked  = regexp.MustCompile("`([^`]+)`")
	flagWord    = regexp.MustCompile(`(?:^|[\s\[(])(--?[A-Za-z][A-Za-z0-9-]*)`)
	cmdWord     = regexp.MustCompile(`^[a-z][a-z-]*$`)
	sentenceEnd = regexp.MustCompile(`\.(\s|$)`)
)

// alternatives splits "knest version | completion" into its commands; a | inside
// brackets ([flags | -f file.yaml]) is between a command's options.
func alternatives(line string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '[':
			depth++
		case line[i] == ']':
			depth--
		case depth == 0 && strings.HasPrefix(line[i:], " | "):
			out = append(out, line[start:i])
			start = i + len(" | ")
		}
	}
	out = append(out, line[start:])
	for i, alt := range out {
		if !strings.HasPrefix(alt, "knest ") {
			out[i] = "knest " + alt
		}
	}
	return out
}

// parseCLIDoc returns, per command of docs/cli.md, the flags it takes: those in its
// table and its inherited ones.
func parseCLIDoc(doc string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	var cur map[string]bool
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			cur = map[string]bool{}
			out[strings.TrimPrefix(line, "## ")] = cur
		case cur == nil:
		case strings.HasPrefix(line, "| `-"):
			addFlags(cur, strings.SplitN(line, " | ", 2)[0])
		case strings.HasPrefix(line, "Inherited flags: "):
			addFlags(cur, line)
		}
	}
	return out
}

func addFlags(set map[string]bool, s string) {
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		if strings.HasPrefix(m[1], "-") {
			set[m[1]] = true
		}
	}
}

// synopsis returns the lines of the first code block under "## The CLI" and the
// flags named in backticks on its "Globals" line, -n/--namespace as two.
func synopsis(md string) (lines, globals []string) {
	_, section, ok := strings.Cut(md, "\n## The CLI\n")
	if !ok {
		return nil, nil
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	parts := strings.SplitN(section, "```", 3)
	if len(parts) < 3 {
		return nil, nil
	}
	for _, l := range strings.Split(parts[1], "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	_, after, _ := strings.Cut(parts[2], "Globals")
	sentence := sentenceEnd.Split(after, 2)[0]
	for _, m := range backticked.FindAllStringSubmatch(sentence, -1) {
		for _, f := range strings.Split(m[1], "/") {
			if strings.HasPrefix(f, "-") {
				globals = append(globals, f)
			}
		}
	}
	return lines, globals
}

// commandLine splits a synopsis line into the command's path (the lower-case words
// after knest) and the flags it names.
func commandLine(line string) (string, []string) {
	words := strings.Fields(line)
	n := 1
	for n < len(words) && cmdWord.MatchString(words[n]) {
		n++
	}
	var named []string
	for _, m := range flagWord.FindAllStringSubmatch(strings.Join(words[n:], " "), -1) {
		named = append(named, m[1])
	}
	return strings.Join(words[:n], " "), named
}
