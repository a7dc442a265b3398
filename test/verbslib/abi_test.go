package verbslib_test

import (
	"bufio"
	"debug/elf"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// The committed reference list (see its header for how it was made).
const refFile = "../../libverbs/abi/libibverbs-debian12.syms"

// exports lists the dynamic symbols a shared library defines, in the
// reference list's notation: name@@VERSION (default) or name@VERSION
// (compat), then func or object. Read with debug/elf, independently of the
// objdump that made the reference.
func exports(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS {
			continue
		}
		bind, typ := elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info)
		if bind != elf.STB_GLOBAL && bind != elf.STB_WEAK {
			continue
		}
		kind := map[elf.SymType]string{elf.STT_FUNC: "func", elf.STT_OBJECT: "object"}[typ]
		if kind == "" {
			continue
		}
		sep := "@@"
		if s.HasVersion && s.VersionIndex.IsHidden() {
			sep = "@"
		}
		out = append(out, s.Name+sep+s.Version+" "+kind)
	}
	slices.Sort(out)
	return out
}

// versionNodes lists the version definitions of a library, in order.
func versionNodes(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range syms {
		if s.Section == elf.SHN_ABS && s.Name == s.Version {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

func reference(t *testing.T) []string {
	t.Helper()
	fh, err := os.Open(refFile)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// diff reports what want has that got lacks and the reverse.
func diff(t *testing.T, what string, want, got []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s lacks %s", what, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s has %s, which the reference does not", what, g)
		}
	}
}

// TestReferenceIsDebian: the committed list is what Debian's installed
// library exports (it cannot go stale unnoticed).
func TestReferenceIsDebian(t *testing.T) {
	if _, err := os.Stat(debianLib); err != nil {
		testenv.Unavailable(t, "%s missing (Debian package libibverbs1; run scripts/install-deps.sh)", debianLib)
	}
	ref := reference(t)
	if len(ref) < 150 {
		t.Fatalf("reference has %d entries; rdma-core v44 exports 180", len(ref))
	}
	diff(t, "Debian's libibverbs.so.1", ref, exports(t, debianLib))
}

// TestExportsMatchDebian: the built library exports exactly the reference
// (name, version) pairs, with the same default/compat split and kinds,
// and defines the same version nodes as Debian's.
func TestExportsMatchDebian(t *testing.T) {
	lib := libDir(t) + "/libibverbs.so.1"
	ref := reference(t)
	got := exports(t, lib)
	diff(t, "build/verbs/libibverbs.so.1", ref, got)
	if len(got) != len(ref) {
		t.Errorf("built library exports %d symbols, the reference %d", len(got), len(ref))
	}
	wantNodes := []string{"IBVERBS_1.0", "IBVERBS_1.1", "IBVERBS_1.10", "IBVERBS_1.11", "IBVERBS_1.12",
		"IBVERBS_1.13", "IBVERBS_1.14", "IBVERBS_1.5", "IBVERBS_1.6", "IBVERBS_1.7", "IBVERBS_1.8",
		"IBVERBS_1.9", "IBVERBS_PRIVATE_34"}
	if nodes := versionNodes(t, lib); !slices.Equal(nodes, wantNodes) {
		t.Errorf("version nodes %v, want %v", nodes, wantNodes)
	}
	if _, err := os.Stat(debianLib); err == nil {
		if dn := versionNodes(t, debianLib); !slices.Equal(dn, wantNodes) {
			t.Errorf("Debian's version nodes %v, want %v", dn, wantNodes)
		}
	}
}
