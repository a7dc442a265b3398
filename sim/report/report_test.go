package report

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/sim"
)

// A real experiment's results, written every way --out writes them.
func TestOutputsCSVAndPlots(t *testing.T) {
	e, err := sim.Load(filepath.Join("..", "..", "configs", "experiments", "incast.yaml"),
		[]string{"duration=400us", "warmup=100us", "sweep.workload.senders=[8, 32]"})
	require.NoError(t, err)
	res, err := e.Execute(sim.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, res.Rows)
	dir := t.TempDir()
	files, err := WriteCSV(res, dir)
	require.NoError(t, err)
	require.Len(t, files, 2)
	pngs, err := WritePlots(res, dir)
	require.NoError(t, err)
	require.Len(t, pngs, 2)
	for _, f := range append(files, pngs...) {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(100))
	}
	require.Len(t, readCSV(t, files[0]), len(res.Rows)+1, "a header and one line per row")
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, res))
	require.Contains(t, b.String(), "converge_rtts")
	require.Len(t, strings.Split(strings.TrimSpace(b.String()), "\n"), len(res.Rows)+2, "title, header, one line per row")
}

// made is a small hand-made result: two runs of one sweep, one with a
// time series.
func made() *sim.Results {
	r := &sim.Results{Experiment: "made", SweepKeys: []string{"loss.rate"}}
	r.Cfg.Description = "a made-up experiment\nsecond line"
	r.Cfg.Report.Columns = []string{"loss.rate", "goodput_gbps", "queue"}
	r.Rows = []sim.Row{
		{{Key: "transport", Value: "metaroce"}, {Key: "loss.rate", Value: 0.0}, {Key: "goodput_gbps", Value: 1234.5},
			{Key: "queue", Value: nil}, {Key: "series", Value: sim.Row{{Key: "t_us", Value: []float64{10, 20}}, {Key: "goodput_gbps", Value: []float64{1.5, 0.000012345}}}}},
		{{Key: "transport", Value: "rocev2"}, {Key: "loss.rate", Value: 0.01}, {Key: "goodput_gbps", Value: 12.34}, {Key: "queue", Value: 0.00123}},
	}
	return r
}

// The table: the description's first line as title, transport and the
// swept keys first, the report's columns after (each once), and figures
// rounded by magnitude; a missing figure is "-".
func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, made()))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, "made: a made-up experiment", lines[0])
	require.Equal(t, []string{"transport", "loss.rate", "goodput_gbps", "queue"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"metaroce", "0", "1234", "-"}, strings.Fields(lines[2]))
	require.Equal(t, []string{"rocev2", "0.010", "12.3", "0.00123"}, strings.Fields(lines[3]))
}

// The CSV files: every scalar field of every row (a missing one empty),
// and one line per run and sample of the time series.
func TestWriteCSV(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteCSV(made(), dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "made.csv"), filepath.Join(dir, "made-series.csv")}, files)
	require.Equal(t, [][]string{
		{"transport", "loss.rate", "goodput_gbps", "queue"},
		{"metaroce", "0", "1234.5", ""},
		{"rocev2", "0.01", "12.34", "0.00123"},
	}, readCSV(t, files[0]))
	require.Equal(t, [][]string{
		{"transport", "loss.rate", "t_us", "goodput_gbps"},
		{"metaroce", "0", "10", "1.5"},
		{"metaroce", "0", "20", "1.2345e-05"},
	}, readCSV(t, files[1]))
}

func readCSV(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	lines, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	return lines
}
