// Package layers enforces the package layers that docs/architecture.md
// draws: what each package of the module may import, that the vocabulary
// and the protocol cores stay sans-I/O, that every engine backend
// implements the one engine.Backend interface, and that only the
// factories name a transport kind. It reads the module through `go list`
// (with the dpdk tag, so the DPDK packages are judged too; go list needs
// no libdpdk) and go/parser, so a rule broken anywhere fails here naming
// the package and the file.
package layers

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/metaroce/metaroce"

// layers is, for every package of the module, the module packages its
// non-test files may import (by path below the module). A package that is
// not listed fails the test: a new package takes its place in the layers
// deliberately, here and in docs/architecture.md.
var layers = map[string][]string{
	// The vocabulary and what it and the cores are built from.
	"internal/queue":  {},
	"internal/cqhook": {},
	"internal/keys":   {},
	"internal/crc32c": {},
	"verbs":           {"internal/cqhook", "internal/queue"},
	// The two protocol cores: the vocabulary only, never each other.
	"metaroce": {"verbs", "internal/cqhook", "internal/queue", "internal/crc32c"},
	"rocev2":   {"verbs", "internal/cqhook", "internal/queue"},
	// What carries packets. engine/ is the interface; the backends
	// implement it. mempair builds metaroce endpoints (it is the core's
	// in-memory test pair) and dpdkengine takes metaroce's UDP port as its
	// default; neither knows rocev2.
	"engine":            {"verbs"},
	"engine/memlink":    {},
	"engine/pcap":       {},
	"engine/udp":        {"engine", "verbs"},
	"engine/mempair":    {"engine", "engine/memlink", "metaroce", "verbs"},
	"engine/dpdkengine": {"engine", "verbs", "metaroce", "dpdk", "lcore", "mempool"},
	// The DPDK binding (cgo), behind the dpdk build tag.
	"cgo":     {},
	"dpdk":    {"cgo"},
	"lcore":   {"cgo", "dpdk"},
	"mempool": {"cgo", "dpdk"},
	// The simulator (sim/layers_test.go orders its packages among
	// themselves).
	"sim/units":    {"verbs"},
	"sim/event":    {"verbs"},
	"sim/fabric":   {"verbs", "sim/event", "sim/units"},
	"sim/workload": {"verbs", "sim/units"},
	"sim":          {"verbs", "metaroce", "rocev2", "internal/keys", "sim/event", "sim/fabric", "sim/units", "sim/workload"},
	"sim/report":   {"sim"},
	// The front ends.
	"profile":      {"internal/keys", "metaroce", "rocev2", "verbs"},
	"metrics":      {},
	"configs":      {},
	"cmd/metaroce": {"*"},
	// The profile loader both front ends share, and the verbs library: a
	// C library (no Go) and its Go transport, a front end like the CLI.
	"internal/profileload": {"configs", "profile"},
	// The transports table both front ends build their device from.
	"internal/transports": {"engine", "engine/dpdkengine", "metaroce", "profile", "rocev2", "verbs"},
	"libverbs":            {},
	"libverbs/golib":      {"*"},
	// Test support and end-to-end tests.
	"internal/verbstest": {"verbs", "engine/mempair", "engine/memlink"},
	"internal/golden":    {},
	// Measures the machine, for the CLI and the harnesses.
	"internal/corelat":       {},
	"test/internal/binary":   {},
	"test/internal/testenv":  {},
	"test/cli":               {"*"},
	"test/dissector":         {"*"},
	"test/fabricscript":      {"*"},
	"test/kernelfabric":      {"*"},
	"test/memifraw":          {"*"},
	"test/rocev2conformance": {"*"},
	"test/verbslib":          {"*"},
	"test/layers":            {},
}

// cgoOnly are the packages made of cgo files only: with CGO_ENABLED=0
// (make test's first pass) go list does not report them.
var cgoOnly = []string{"libverbs/golib"}

// sansIO are the packages that must not do I/O, read the clock or the OS's
// randomness, or start goroutines: the vocabulary, the two cores and the
// internal packages they are built from.
var sansIO = []string{"verbs", "metaroce", "rocev2", "internal/queue", "internal/cqhook", "internal/crc32c"}

// forbidden are the standard-library imports a sans-I/O package may not
// name directly: I/O, the OS, locks (one goroutine owns a core), cgo, and
// the OS's or a global random source.
var forbidden = []string{"net", "os", "os/exec", "os/signal", "syscall", "sync", "sync/atomic", "unsafe",
	"runtime/cgo", "C", "math/rand", "math/rand/v2", "crypto/rand", "io/ioutil", "log"}

// clockReads are the functions of package time that read the clock or
// wait on it.
var clockReads = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// backends are the packages under engine/ that are backends: each must
// assert at compile time that a type of it is an engine.Backend. The
// others are listed in notBackends, so a new package under engine/ is
// classified deliberately.
var (
	backends    = []string{"engine/udp", "engine/mempair", "engine/dpdkengine"}
	notBackends = []string{"engine", "engine/memlink", "engine/pcap"}
)

// factories are the files allowed to name a transport kind in a switch or
// a comparison: the CLI's map of transports, the simulator's table and
// the profile that defines the kinds.
var factories = []string{"cmd/metaroce/transports.go", "sim/registry.go", "profile/"}

type pkg struct {
	ImportPath   string
	Dir          string
	Standard     bool
	Imports      []string
	Deps         []string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// modulePackages lists every package of the module, with the dpdk tag.
func modulePackages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "dpdk", "-json", module+"/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	ps := map[string]pkg{}
	for dec := json.NewDecoder(&out); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		ps[rel] = p
	}
	if len(ps) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(ps))
	}
	return ps
}

func local(imp string) (string, bool) {
	rel, ok := strings.CutPrefix(imp, module+"/")
	return rel, ok
}

// Every package is in the table and imports only what its layer allows;
// nothing outside cmd/metaroce imports viper, zap or cobra, and only the
// two reports (sim/report and the CLI's bench plot) import gonum.
func TestImportLayers(t *testing.T) {
	ps := modulePackages(t)
	for rel, p := range ps {
		allowed, ok := layers[rel]
		if !ok {
			t.Errorf("package %s has no layer: add it to layers (and to docs/architecture.md)", rel)
			continue
		}
		for _, imp := range p.Imports {
			if l, ok := local(imp); ok {
				if !slices.Contains(allowed, "*") && !slices.Contains(allowed, l) {
					t.Errorf("%s imports %s, which its layer does not allow", rel, l)
				}
				continue
			}
			for _, only := range []struct {
				prefix string
				owners []string
			}{
				{"github.com/spf13/", []string{"cmd/metaroce", "internal/profileload"}}, {"go.uber.org/zap", []string{"cmd/metaroce"}},
				{"gonum.org/", []string{"sim/report", "cmd/metaroce"}}, // the bench plot draws too
			} {
				if strings.HasPrefix(imp, only.prefix) && !slices.Contains(only.owners, rel) {
					t.Errorf("%s imports %s: only %v may", rel, imp, only.owners)
				}
			}
		}
	}
	for rel := range layers {
		if _, ok := ps[rel]; !ok && !slices.Contains(cgoOnly, rel) {
			t.Errorf("layers names %s, which is not a package of the module", rel)
		}
	}
}

// rocev2 never imports metaroce, nor metaroce rocev2, directly or through
// another package: they share the verbs vocabulary and nothing else.
func TestCoresIndependent(t *testing.T) {
	ps := modulePackages(t)
	for _, pair := range [][2]string{{"rocev2", "metaroce"}, {"metaroce", "rocev2"}, {"verbs", "metaroce"}, {"verbs", "rocev2"}} {
		p, ok := ps[pair[0]]
		if !ok {
			t.Fatalf("no package %s", pair[0])
		}
		if slices.Contains(p.Deps, module+"/"+pair[1]) {
			t.Errorf("%s depends on %s", pair[0], pair[1])
		}
	}
}

// The vocabulary, the cores and what they are built from stay sans-I/O:
// no forbidden import, no cgo, no dependency outside the standard library
// and this module, no clock read and no goroutine in any non-test file.
func TestSansIO(t *testing.T) {
	ps := modulePackages(t)
	files := 0
	for _, rel := range sansIO {
		p, ok := ps[rel]
		if !ok {
			t.Fatalf("no package %s", rel)
		}
		if len(p.CgoFiles) > 0 {
			t.Errorf("%s has cgo files %v", rel, p.CgoFiles)
		}
		for _, imp := range p.Imports {
			if slices.Contains(forbidden, imp) {
				t.Errorf("%s imports %s", rel, imp)
			}
		}
		for _, d := range p.Deps {
			if d == "net" || d == "runtime/cgo" {
				t.Errorf("%s depends on %s", rel, d)
			}
			if _, ok := local(d); !ok && strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				t.Errorf("%s depends on %s, outside the standard library", rel, d)
			}
		}
		for _, name := range p.GoFiles {
			files++
			path := filepath.Join(p.Dir, name)
			f := parse(t, path)
			timeName := importName(f, "time")
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: starts a goroutine", position(n))
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && slices.Contains(clockReads, n.Sel.Name) {
						t.Errorf("%s: reads the clock (time.%s)", position(n), n.Sel.Name)
					}
				}
				return true
			})
		}
	}
	if files < 50 {
		t.Fatalf("checked %d files of the sans-I/O packages; there are more", files)
	}
}

// Every backend package asserts `var _ engine.Backend = ...`, and every
// package under engine/ is either a backend or listed as not one.
func TestBackendsImplementEngineBackend(t *testing.T) {
	ps := modulePackages(t)
	for rel := range ps {
		if rel == "engine" || strings.HasPrefix(rel, "engine/") {
			if !slices.Contains(backends, rel) && !slices.Contains(notBackends, rel) {
				t.Errorf("%s is under engine/ but neither a backend nor listed as not one", rel)
			}
		}
	}
	for _, rel := range backends {
		p, ok := ps[rel]
		if !ok {
			t.Fatalf("no package %s", rel)
		}
		found := false
		for _, name := range append(slices.Clone(p.GoFiles), p.CgoFiles...) {
			f := parse(t, filepath.Join(p.Dir, name))
			eng := importName(f, module+"/engine")
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, s := range g.Specs {
					v := s.(*ast.ValueSpec)
					if sel, ok := v.Type.(*ast.SelectorExpr); ok && len(v.Names) == 1 && v.Names[0].Name == "_" {
						if id, ok := sel.X.(*ast.Ident); ok && eng != "" && id.Name == eng && sel.Sel.Name == "Backend" {
							found = true
						}
					}
				}
			}
		}
		if !found {
			t.Errorf("%s asserts no `var _ engine.Backend = ...`", rel)
		}
	}
}

// The simulator is several packages.
func TestSimIsSeveralPackages(t *testing.T) {
	n := 0
	for rel := range modulePackages(t) {
		if rel == "sim" || strings.HasPrefix(rel, "sim/") {
			n++
		}
	}
	if n < 5 {
		t.Errorf("sim is %d packages, want the event engine, units, fabric, workloads, report and the run", n)
	}
}

// Only the factories name a transport kind in a switch or a comparison:
// everything else runs the verbs interfaces. Test files may compare
// results per transport (thresholds differ) but may not switch on it.
func TestNoSwitchOnTransportKind(t *testing.T) {
	ps := modulePackages(t)
	files := 0
	for rel, p := range ps {
		all := append(append(slices.Clone(p.GoFiles), p.CgoFiles...), append(p.TestGoFiles, p.XTestGoFiles...)...)
		for _, name := range all {
			file := filepath.ToSlash(filepath.Join(rel, name))
			if slices.ContainsFunc(factories, func(f string) bool { return file == f || strings.HasSuffix(f, "/") && strings.HasPrefix(file, f) }) {
				continue
			}
			files++
			test := strings.HasSuffix(name, "_test.go")
			path := filepath.Join(p.Dir, name)
			f := parse(t, path)
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CaseClause:
					for _, e := range n.List {
						if namesKind(e) {
							t.Errorf("%s: a case on the transport kind outside the factories", position(n))
						}
					}
				case *ast.BinaryExpr:
					if !test && (n.Op == token.EQL || n.Op == token.NEQ) && (namesKind(n.X) || namesKind(n.Y)) {
						t.Errorf("%s: compares with a transport kind outside the factories", position(n))
					}
				}
				return true
			})
		}
	}
	if files < 100 {
		t.Fatalf("checked %d files; the module has more", files)
	}
}

// namesKind says whether e names a transport kind: profile's constants or
// the transports' names as string literals.
func namesKind(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "TransportMetaroce" || e.Sel.Name == "TransportRoCEv2"
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(e.Value)
		return err == nil && (s == "metaroce" || s == "rocev2")
	}
	return false
}

// fset holds the positions of every file the tests parse.
var fset = token.NewFileSet()

func parse(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return f
}

// importName is the name file f uses for the package at path ("" if f
// does not import it).
func importName(f *ast.File, path string) string {
	for _, s := range f.Imports {
		if p, _ := strconv.Unquote(s.Path.Value); p == path {
			if s.Name != nil {
				return s.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// position names the file and line of n.
func position(n ast.Node) string { return fset.Position(n.Pos()).String() }
