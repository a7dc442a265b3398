package cgo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const self = "github.com/metaroce/metaroce/cgo"

var include = regexp.MustCompile(`(?m)^\s*#include\s+"([^"]+)"`)

// Every package of the module that uses cgo imports this package (so a
// changed header rebuilds it, see the package comment), and every quoted
// header its preambles include is one of Headers (so it is found with
// -I${SRCDIR}/../cgo and tracked). Files are parsed whatever their build
// constraints: the rule holds with and without -tags dpdk.
func TestIncludersImport(t *testing.T) {
	type pkg struct{ usesC, importsSelf bool }
	pkgs := map[string]*pkg{}
	includes := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || n == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkg{}
			pkgs[dir] = p
		}
		for _, spec := range importSpecs(f) {
			ip, _ := strconv.Unquote(spec.path.Path.Value)
			switch ip {
			case self:
				p.importsSelf = p.importsSelf || !strings.HasSuffix(path, "_test.go")
			case "C":
				p.usesC = true
				for _, m := range include.FindAllStringSubmatch(spec.preamble, -1) {
					includes++
					if _, err := fs.Stat(Headers, m[1]); err != nil {
						t.Errorf("%s includes %q, which is not a header of cgo/ (Headers)", path, m[1])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for dir, p := range pkgs {
		if !p.usesC {
			continue
		}
		n++
		if !p.importsSelf {
			t.Errorf("%s uses cgo but no non-test file imports %s: a changed header would not rebuild it", dir, self)
		}
	}
	if n == 0 || includes == 0 {
		t.Fatalf("%d packages use cgo, %d quoted includes: the walk found nothing to check", n, includes)
	}
}

// The embedded headers are this directory's *.h files, byte for byte.
func TestHeadersEmbedded(t *testing.T) {
	files, err := filepath.Glob("*.h")
	if err != nil || len(files) == 0 {
		t.Fatalf("no headers in cgo/: %v", err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Headers.ReadFile(f)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: embedded copy differs from the file (err %v)", f, err)
		}
	}
}

type importSpec struct {
	path     *ast.ImportSpec
	preamble string // the cgo preamble, for import "C"
}

// importSpecs lists a file's imports with, for import "C", the comment
// above it (the spec's own or its declaration's).
func importSpecs(f *ast.File) []importSpec {
	var out []importSpec
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		for _, s := range g.Specs {
			is := s.(*ast.ImportSpec)
			doc := is.Doc
			if doc == nil && len(g.Specs) == 1 {
				doc = g.Doc
			}
			pre := ""
			if doc != nil {
				pre = doc.Text()
			}
			out = append(out, importSpec{path: is, preamble: pre})
		}
	}
	return out
}
