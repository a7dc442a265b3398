// Package golden keeps the figures quoted in the README and docs/ equal to
// what the programs print.
//
// A golden file (a package's testdata/...) holds a deterministic output:
// the package's test compares the program's output with it (File), and
// `go test ... -update` rewrites it. A document quotes a golden file in a
// block between two marker lines naming it by its path from the module
// root:
//
//	<!-- golden cmd/metaroce/testdata/demo-mem.golden -->
//	```
//	...the file's content...
//	```
//	<!-- /golden -->
//
// TestDocsMatchGoldens (this package) fails when a block differs from its
// file, and File under -update rewrites every block that quotes the file
// it updates. A block's content is the file's, inside one ``` fence when
// the block has one (output), bare otherwise (a markdown table).
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files, and the README/docs blocks that quote them, from the programs' output")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Docs are the documents whose golden blocks are kept, relative to the
// module root (docs/*.md is expanded).
var Docs = []string{"README.md", "docs/*.md"}

const (
	openMark  = "<!-- golden "
	closeMark = "<!-- /golden -->"
	fence     = "```"
)

// Root returns the module root: the nearest directory at or above the
// working directory (a package's directory under go test) with a go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("golden: no go.mod above the working directory")
		}
		dir = up
	}
}

// File compares got with the golden file at path (relative to the test's
// package directory). Under -update it writes got there instead and
// rewrites the document blocks that quote the file.
func File(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syncDocs(path, got); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (go test -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("output differs from %s (go test -update rewrites it and the docs quoting it):\n%s", path, Diff(string(want), string(got)))
	}
}

// Block is one golden block of a document.
type Block struct {
	Doc    string // document path, relative to the module root
	Line   int    // line of the opening marker, 1-based
	File   string // the golden file quoted, relative to the module root
	Fenced bool   // the content is inside a ``` fence
	Body   string // the content (inside the fence when Fenced), Indent removed
	Indent string // the marker line's leading blanks, before every line of the block (a block inside a list item)
	start  int    // byte offsets of the block's content in the document
	end    int
}

// Blocks returns the golden blocks of the document text (named doc).
func Blocks(doc string, text []byte) ([]Block, error) {
	var out []Block
	s := string(text)
	pos, line := 0, 1
	for {
		i := strings.Index(s[pos:], openMark)
		if i < 0 {
			return out, nil
		}
		i += pos
		line += strings.Count(s[pos:i], "\n")
		bol := strings.LastIndexByte(s[:i], '\n') + 1
		indent := s[bol:i]
		if strings.Trim(indent, " \t") != "" {
			// Not a marker: the text names one (`<!-- golden PATH -->`).
			pos = i + len(openMark)
			continue
		}
		eol := strings.IndexByte(s[i:], '\n')
		if eol < 0 {
			return nil, fmt.Errorf("%s:%d: golden marker without a line end", doc, line)
		}
		head := strings.TrimSpace(s[i : i+eol])
		file, ok := strings.CutSuffix(strings.TrimPrefix(head, openMark), "-->")
		file = strings.TrimSpace(file)
		if !ok || file == "" || strings.ContainsAny(file, " \t") {
			return nil, fmt.Errorf("%s:%d: golden marker %q: want <!-- golden PATH -->", doc, line, head)
		}
		start := i + eol + 1
		j := strings.Index(s[start:], closeMark)
		if j < 0 {
			return nil, fmt.Errorf("%s:%d: golden block %s has no %s", doc, line, file, closeMark)
		}
		end := start + j
		if k := strings.Index(s[start:end], openMark); k >= 0 {
			return nil, fmt.Errorf("%s:%d: golden block %s opens another before it closes", doc, line, file)
		}
		b := Block{Doc: doc, Line: line, File: file, Indent: indent, start: start, end: end - len(indent)}
		if !strings.HasSuffix(s[start:end], "\n"+indent) && start != end-len(indent) {
			return nil, fmt.Errorf("%s:%d: golden block %s: closing marker not indented as the opening one", doc, line, file)
		}
		body, err := unindent(s[start:b.end], indent)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: golden block %s: %v", doc, line, file, err)
		}
		if inner, ok := strings.CutPrefix(body, fence+"\n"); ok {
			if inner, ok = strings.CutSuffix(inner, fence+"\n"); ok {
				b.Fenced, body = true, inner
			}
		}
		b.Body = body
		out = append(out, b)
		line += strings.Count(s[i:end], "\n")
		pos = end + len(closeMark)
	}
}

// content is what a block quoting data holds between its markers.
func content(b Block, data []byte) string {
	c := string(data)
	if b.Fenced {
		c = fence + "\n" + c + fence + "\n"
	}
	if b.Indent == "" {
		return c
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(c, "\n") {
		if l != "" && l != "\n" {
			out.WriteString(b.Indent)
		}
		out.WriteString(l)
	}
	return out.String()
}

// unindent removes indent from the start of every non-empty line of s.
func unindent(s, indent string) (string, error) {
	if indent == "" {
		return s, nil
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l == "" || l == "\n" {
			out.WriteString(l)
			continue
		}
		rest, ok := strings.CutPrefix(l, indent)
		if !ok {
			return "", fmt.Errorf("line %q is not indented as the marker", strings.TrimSuffix(l, "\n"))
		}
		out.WriteString(rest)
	}
	return out.String(), nil
}

// DocFiles returns the documents (relative to root) whose blocks are kept.
func DocFiles(root string) ([]string, error) {
	var out []string
	for _, pat := range Docs {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			return nil, err
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				return nil, err
			}
			out = append(out, rel)
		}
	}
	return out, nil
}

// syncDocs rewrites every block quoting the golden file path (relative to
// the working directory) with data.
func syncDocs(path string, data []byte) error {
	root, err := Root()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	docs, err := DocFiles(root)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if err := Rewrite(root, d, func(b Block) ([]byte, bool) { return data, b.File == rel }); err != nil {
			return err
		}
	}
	return nil
}

// Rewrite replaces, in document doc (relative to root), the content of
// every block for which with returns true by the data it returns; the
// file is written only if it changes.
func Rewrite(root, doc string, with func(Block) ([]byte, bool)) error {
	p := filepath.Join(root, doc)
	text, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	blocks, err := Blocks(doc, text)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	last := 0
	for _, b := range blocks {
		data, ok := with(b)
		if !ok {
			continue
		}
		out.Write(text[last:b.start])
		out.WriteString(content(b, data))
		last = b.end
	}
	out.Write(text[last:])
	if bytes.Equal(out.Bytes(), text) {
		return nil
	}
	return os.WriteFile(p, out.Bytes(), 0o644)
}

// Diff returns the lines of want and got that differ, a few at most, as
// "-want" and "+got" pairs with their line numbers.
func Diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 12; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i+1, wl, gl)
			shown++
		}
	}
	if len(w) != len(g) {
		fmt.Fprintf(&b, "(%d lines, want %d)\n", len(g), len(w))
	}
	return b.String()
}
