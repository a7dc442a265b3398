package sim_test

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/golden"
	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/sim/report"
)

var fullExperiments = flag.Bool("full", false,
	"TestExperimentGoldens: also run the full-size experiments that take long (collectives, plane-scaling, plane-failure, ecmp-collision)")

// goldenExperiments are the experiment files of configs/experiments whose
// full-size table (what `metaroce sim FILE` prints, and `make experiments`
// writes to out/NAME.txt) is kept in testdata/experiments/NAME.txt. The
// cheap ones (about a second of CPU together) are run and compared on
// every go test; the others take from seconds to a minute of CPU each and
// are run only with -full (go test ./sim
// -run TestExperimentGoldens -full [-update]).
var goldenExperiments = []struct {
	name  string
	cheap bool
}{
	{"asymmetry", true}, {"incast", true}, {"loss-sweep", true}, {"pfc-incast", true}, {"rocev2-capture", true},
	// Seconds of CPU each (3 and 6 s here; ten times that under -race).
	{"ecmp-collision", false}, {"plane-failure", false},
	// Tens of seconds each.
	{"collectives", false}, {"collectives-channels", false}, {"collectives-jumbo", false}, {"plane-scaling", false},
}

func goldenTablePath(name string) string {
	return filepath.Join("testdata", "experiments", name+".txt")
}

// Every experiment file has its golden table, and the tables of the
// full-size runs are what the simulator prints today (the deterministic
// runs of the same code give the same bytes).
func TestExperimentGoldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "experiments", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, goldenExperiments, len(files), "every experiment file has a golden table")
	for _, g := range goldenExperiments {
		t.Run(g.name, func(t *testing.T) {
			require.FileExists(t, filepath.Join("..", "configs", "experiments", g.name+".yaml"))
			if !g.cheap && !*fullExperiments {
				t.Skipf("full size takes long: go test ./sim -run TestExperimentGoldens/%s -full", g.name)
			}
			e, err := sim.Load(filepath.Join("..", "configs", "experiments", g.name+".yaml"), nil)
			require.NoError(t, err)
			res, err := e.Execute(sim.Options{})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, report.WriteTable(&b, res))
			golden.File(t, goldenTablePath(g.name), b.Bytes())
		})
	}
}

// goldenTable is a golden experiment table: its rows by column name.
type goldenTable struct {
	cols []string
	rows []map[string]string
}

func readGoldenTable(t *testing.T, name string) goldenTable {
	t.Helper()
	data, err := os.ReadFile(goldenTablePath(name))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	require.Greater(t, len(lines), 2, "%s: title, header and rows", name)
	require.True(t, strings.HasPrefix(lines[0], name+": "), "%s: title line %q", name, lines[0])
	// The table is right-aligned (text/tabwriter): each cell ends where
	// its header ends, so cells with spaces inside (JSON maps) survive.
	head := lines[1]
	tb := goldenTable{cols: strings.Fields(head)}
	var ends []int
	for i := range len(head) {
		if head[i] != ' ' && (i+1 == len(head) || head[i+1] == ' ') {
			ends = append(ends, i+1)
		}
	}
	require.Len(t, ends, len(tb.cols))
	for _, l := range lines[2:] {
		require.Len(t, l, len(head), "%s: row %q is not aligned with the header", name, l)
		row := map[string]string{}
		from := 0
		for i, c := range tb.cols {
			cell := strings.TrimSpace(l[from:ends[i]])
			require.NotEmpty(t, cell, "%s: column %s of %q", name, c, l)
			row[c] = cell
			from = ends[i]
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// find returns the one row whose columns have the given values.
func (tb goldenTable) find(t *testing.T, want map[string]string) map[string]string {
	t.Helper()
	var hit []map[string]string
	for _, r := range tb.rows {
		ok := true
		for k, v := range want {
			if r[k] != v {
				ok = false
			}
		}
		if ok {
			hit = append(hit, r)
		}
	}
	require.Len(t, hit, 1, "rows with %v", want)
	return hit[0]
}

// The tables docs/ quotes are rendered from the golden experiment tables
// into testdata/experiments/NAME.md, which the docs' golden blocks quote
// (internal/golden checks those). Rendering reads the golden tables, not
// new runs, so this is cheap and covers the full-size-only experiments
// too; TestExperimentGoldens keeps the tables themselves current.
func TestDocTablesFromGoldens(t *testing.T) {
	for name, render := range map[string]func(*testing.T) string{
		"pfc-incast":           pfcIncastDocTable,
		"collectives-channels": collectivesDocTable,
		"readme":               readmeTable,
	} {
		t.Run(name, func(t *testing.T) {
			golden.File(t, filepath.Join("testdata", "experiments", name+".md"), []byte(render(t)))
		})
	}
}

// pfcIncastDocTable is docs/sim.md's table of pfc-incast.yaml.
func pfcIncastDocTable(t *testing.T) string {
	tb := readGoldenTable(t, "pfc-incast")
	var b strings.Builder
	b.WriteString("| N | PFC | goodput Gb/s | Jain | peak queue KiB | buffer drops | pauses | paused links | max paused µs | retransmits |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	blank := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	require.Len(t, tb.rows, 6)
	for _, r := range tb.rows {
		pfc := map[string]string{"false": "off", "true": "on"}[r["topology.pfc.enabled"]]
		require.NotEmpty(t, pfc, "%v", r)
		b.WriteString(mdRow(r["workload.senders"], pfc, r["goodput_gbps"], r["jain"], r["peak_queue_kib"], r["buffer_drops"],
			blank(r["pfc_pauses"]), blank(r["pfc_paused_links"]), blank(r["pfc_max_paused_us"]), r["retransmits"]))
	}
	return b.String()
}

// mdRow is one markdown table row; an empty cell is "| |".
func mdRow(cells ...string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		if c == "" {
			b.WriteString(" |")
		} else {
			b.WriteString(" " + c + " |")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// collectivesDocTable is docs/congestion.md's table of completion times
// (collectives-channels.yaml), in ms; "fails" where the run did not
// complete (no completion time).
func collectivesDocTable(t *testing.T) string {
	tb := readGoldenTable(t, "collectives-channels")
	ms := func(r map[string]string) string {
		if r["completion_us"] == "-" {
			return "fails"
		}
		us, err := strconv.ParseFloat(r["completion_us"], 64)
		require.NoError(t, err)
		// Hundredths of a ms, halves up (as the docs were rounded by
		// hand; %.2f of 10.325 gives 10.32).
		return fmt.Sprintf("%.2f", math.Floor(us/10+0.5)/100)
	}
	var b strings.Builder
	b.WriteString("| collective, placement | channels | metaroce (lossy / PFC) | RoCEv2 lossy | RoCEv2 PFC |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range []struct {
		kind, label string
		channels    []string
	}{{"allreduce", "all-reduce", []string{"1", "4"}}, {"all-to-all", "all-to-all", []string{"1", "2", "4"}}} {
		for _, place := range []string{"packed", "spread"} {
			for _, ch := range c.channels {
				at := func(tr, pfc string) string {
					return ms(tb.find(t, map[string]string{"transport": tr, "workload.kind": c.kind,
						"workload.placement": place, "topology.pfc.enabled": pfc, "workload.channels": ch}))
				}
				fmt.Fprintf(&b, "| %s, %s | %s | %s / %s | %s | %s |\n", c.label, place, ch,
					at("metaroce", "false"), at("metaroce", "true"), at("rocev2", "false"), at("rocev2", "true"))
			}
		}
	}
	return b.String()
}
