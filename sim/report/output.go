// Package report presents an execution's results: the table the CLI
// prints, the CSV files and the PNG plots that --out writes. It reads
// sim.Results and nothing else of the simulator, and it is the only part
// of it that draws: gonum/plot is imported here and nowhere below.
package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/metaroce/metaroce/sim"
)

// columns are the fields the table and the CSV show: transport, the
// swept keys, then report.columns (default goodput_gbps, link_gbps,
// efficiency).
func columns(r *sim.Results) []string {
	cols := append([]string{"transport"}, r.SweepKeys...)
	extra := r.Cfg.Report.Columns
	if len(extra) == 0 {
		extra = []string{"goodput_gbps", "link_gbps", "efficiency"}
	}
	for _, c := range extra {
		dup := false
		for _, have := range cols {
			dup = dup || have == c
		}
		if !dup {
			cols = append(cols, c)
		}
	}
	return cols
}

// WriteTable writes a readable table of r's rows to w.
func WriteTable(w io.Writer, r *sim.Results) error {
	fmt.Fprintf(w, "%s", r.Experiment)
	if d := strings.TrimSpace(r.Cfg.Description); d != "" {
		fmt.Fprintf(w, ": %s", strings.SplitN(d, "\n", 2)[0])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := columns(r)
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, row := range r.Rows {
		for _, c := range cols {
			v, _ := row.Get(c)
			fmt.Fprintf(tw, "%s\t", tableValue(v))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func tableValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		switch {
		case x == 0:
			return "0"
		case x >= 1000 || x <= -1000:
			return strconv.FormatFloat(x, 'f', 0, 64)
		case x >= 10 || x <= -10:
			return strconv.FormatFloat(x, 'f', 1, 64)
		case x >= 0.01 || x <= -0.01:
			return strconv.FormatFloat(x, 'f', 3, 64)
		}
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
	return fmt.Sprint(v)
}

func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return sim.FormatFloat(x)
	}
	return fmt.Sprint(v)
}

// WriteCSV writes r to DIR/<experiment>.csv (every scalar field of every row)
// and, when runs have time series, DIR/<experiment>-series.csv (one line
// per run and sample: the run's transport and swept keys, then t_us and
// each series).
func WriteCSV(r *sim.Results, dir string) ([]string, error) {
	var files []string
	var keys []string
	seen := map[string]bool{}
	for _, row := range r.Rows {
		for _, f := range row {
			if _, isSeries := f.Value.(sim.Row); isSeries || seen[f.Key] {
				continue
			}
			seen[f.Key] = true
			keys = append(keys, f.Key)
		}
	}
	var lines [][]string
	lines = append(lines, keys)
	for _, row := range r.Rows {
		var l []string
		for _, k := range keys {
			v, _ := row.Get(k)
			l = append(l, csvValue(v))
		}
		lines = append(lines, l)
	}
	name := filepath.Join(dir, r.Experiment+".csv")
	if err := writeCSVFile(name, lines); err != nil {
		return nil, err
	}
	files = append(files, name)

	var sl [][]string
	for _, row := range r.Rows {
		sv, ok := row.Get("series")
		if !ok {
			continue
		}
		series := sv.(sim.Row)
		id := []string{}
		idKeys := append([]string{"transport"}, r.SweepKeys...)
		for _, k := range idKeys {
			v, _ := row.Get(k)
			id = append(id, csvValue(v))
		}
		if len(sl) == 0 {
			h := append([]string{}, idKeys...)
			for _, f := range series {
				h = append(h, f.Key)
			}
			sl = append(sl, h)
		}
		n := len(series[0].Value.([]float64))
		for i := 0; i < n; i++ {
			l := append([]string{}, id...)
			for _, f := range series {
				xs := f.Value.([]float64)
				if i < len(xs) {
					l = append(l, sim.FormatFloat(xs[i]))
				} else {
					l = append(l, "")
				}
			}
			sl = append(sl, l)
		}
	}
	if len(sl) > 0 {
		name := filepath.Join(dir, r.Experiment+"-series.csv")
		if err := writeCSVFile(name, sl); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}

func writeCSVFile(name string, lines [][]string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(lines); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
