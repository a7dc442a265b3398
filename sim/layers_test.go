package sim

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/metaroce/metaroce/"

// simLayers is what each package of the simulator may import from this
// module (its non-test files): the event engine and the units at the
// bottom, the fabric and the workloads on them (neither knows the
// other), the run (sim) on all of them, and the report on top. No
// package names one above it, so there is no cycle.
var simLayers = map[string][]string{
	"sim/units":    {"verbs"},
	"sim/event":    {"verbs"},
	"sim/fabric":   {"verbs", "sim/event", "sim/units"},
	"sim/workload": {"verbs", "sim/units"},
	"sim":          {"verbs", "metaroce", "rocev2", "sim/event", "sim/fabric", "sim/units", "sim/workload", "internal/keys"},
	"sim/report":   {"sim"},
}

// The simulator's packages import only the layers below them, and only
// sim/report imports gonum.
func TestSimLayers(t *testing.T) {
	seen := 0
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir // not a package (the go tool ignores it)
		}
		pkg := filepath.ToSlash(filepath.Join("sim", path))
		allowed, ok := simLayers[pkg]
		require.True(t, ok, "package %s has no layer in simLayers", pkg)
		seen++
		for _, imp := range imports(t, path) {
			if strings.HasPrefix(imp, "gonum.org/") {
				require.Equal(t, "sim/report", pkg, "%s imports %s: only sim/report draws", pkg, imp)
			}
			local, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			require.Contains(t, allowed, local, "%s imports %s", pkg, local)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(simLayers), seen, "every layer is a package that exists")
}

// imports lists the imports of the non-test Go files in dir.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	set := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, is := range af.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			require.NoError(t, err)
			set[p] = true
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
