package cgo

import (
	"go/build/constraint"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dpdkDirs are the folders whose every Go file needs cgo and libdpdk (or
// imports a package that does), relative to the module root.
var dpdkDirs = []string{"dpdk", "mempool", "lcore", "engine/dpdkengine", "test/memifraw"}

// Every Go file of the DPDK folders builds only with the dpdk tag, so a
// file added there without //go:build dpdk (a merge, a new test) is
// caught here and not by the first machine without libdpdk. The build
// without the tag (make test-nodpdk) catches a file that imports them.
func TestDPDKFoldersTagged(t *testing.T) {
	for _, dir := range dpdkDirs {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no Go files (%v)", dir, err)
			continue
		}
		for _, f := range files {
			expr, err := buildConstraint(f)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			with := expr != nil && expr.Eval(func(tag string) bool { return tag == "dpdk" || tag == "linux" || tag == "amd64" })
			without := expr == nil || expr.Eval(func(tag string) bool { return tag == "linux" || tag == "amd64" })
			if !with || without {
				t.Errorf("%s: want //go:build dpdk (built with the tag only), have %v", f, expr)
			}
		}
	}
}

// buildConstraint is the file's //go:build expression, nil if none.
func buildConstraint(path string) (constraint.Expr, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			break
		}
		if constraint.IsGoBuild(line) {
			return constraint.Parse(line)
		}
	}
	return nil, nil
}
