package report

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/metaroce/metaroce/sim"
)

// WritePlots draws r's report.plots as PNGs in dir (a default plot of goodput
// when the file asks for none) and returns the files written.
func WritePlots(r *sim.Results, dir string) ([]string, error) {
	plots := r.Cfg.Report.Plots
	if len(plots) == 0 {
		x := "transport"
		if len(r.SweepKeys) > 0 {
			x = r.SweepKeys[len(r.SweepKeys)-1]
		}
		plots = []sim.PlotConfig{{Kind: "line", X: x, Y: "goodput_gbps", Series: []string{"transport"}}}
	}
	var files []string
	for _, pc := range plots {
		name := r.Experiment
		if pc.Name != "" {
			name += "-" + pc.Name
		}
		file := filepath.Join(dir, name+".png")
		var err error
		if pc.Kind == "series" {
			err = plotSeries(r, pc, file)
		} else {
			err = plotLine(r, pc, file)
		}
		if err != nil {
			return files, fmt.Errorf("plot %s: %w", file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

func newPlot(pc sim.PlotConfig, title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	if pc.Title != "" {
		p.Title.Text = pc.Title
	}
	p.X.Label.Text, p.Y.Label.Text = x, y
	if pc.XLabel != "" {
		p.X.Label.Text = pc.XLabel
	}
	if pc.YLabel != "" {
		p.Y.Label.Text = pc.YLabel
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// label names a line by the values of keys in row.
func label(row sim.Row, keys []string) string {
	var parts []string
	for _, k := range keys {
		v, _ := row.Get(k)
		if k == "transport" {
			parts = append(parts, fmt.Sprint(v))
			continue
		}
		short := k[strings.LastIndexByte(k, '.')+1:]
		parts = append(parts, fmt.Sprintf("%s=%v", short, v))
	}
	return strings.Join(parts, " ")
}

// plotLine: one line per distinct value of the series keys, points (x, y)
// from the rows; a non-numeric x becomes the points' order.
func plotLine(r *sim.Results, pc sim.PlotConfig, file string) error {
	p := newPlot(pc, r.Experiment, pc.X, pc.Y)
	type line struct {
		name string
		xy   plotter.XYs
	}
	var lines []*line
	byName := map[string]*line{}
	var cats []string
	catIdx := map[string]int{}
	for _, row := range r.Rows {
		y, ok := row.Float(pc.Y)
		if !ok {
			continue
		}
		xv, _ := row.Get(pc.X)
		x, ok := sim.Number(xv)
		if !ok {
			c := fmt.Sprint(xv)
			if _, seen := catIdx[c]; !seen {
				catIdx[c] = len(cats)
				cats = append(cats, c)
			}
			x = float64(catIdx[c])
		}
		n := label(row, pc.Series)
		l := byName[n]
		if l == nil {
			l = &line{name: n}
			byName[n] = l
			lines = append(lines, l)
		}
		l.xy = append(l.xy, plotter.XY{X: x, Y: y})
	}
	if len(cats) > 0 {
		ticks := make([]plot.Tick, len(cats))
		for i, c := range cats {
			ticks[i] = plot.Tick{Value: float64(i), Label: c}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	for i, l := range lines {
		sort.SliceStable(l.xy, func(a, b int) bool { return l.xy[a].X < l.xy[b].X })
		lp, sp, err := plotter.NewLinePoints(l.xy)
		if err != nil {
			return err
		}
		lp.Color = plotutil.Color(i)
		lp.Dashes = plotutil.Dashes(i)
		sp.Color = plotutil.Color(i)
		sp.Shape = plotutil.Shape(i)
		p.Add(lp, sp)
		p.Legend.Add(l.name, lp, sp)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}

// plotSeries: one line per run, time on x, the named series on y.
func plotSeries(r *sim.Results, pc sim.PlotConfig, file string) error {
	p := newPlot(pc, r.Experiment, "time (µs)", pc.Y)
	keys := pc.Series
	if len(keys) == 0 {
		keys = append([]string{"transport"}, r.SweepKeys...)
	}
	i := 0
	for _, row := range r.Rows {
		sv, ok := row.Get("series")
		if !ok {
			continue
		}
		series := sv.(sim.Row)
		tv, ok1 := series.Get("t_us")
		yv, ok2 := series.Get(pc.Y)
		if !ok1 || !ok2 {
			continue
		}
		ts, ys := tv.([]float64), yv.([]float64)
		xy := make(plotter.XYs, 0, len(ts))
		for k := range ts {
			if k < len(ys) {
				xy = append(xy, plotter.XY{X: ts[k], Y: ys[k]})
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		p.Add(l)
		p.Legend.Add(label(row, keys), l)
		i++
	}
	if i == 0 {
		p.Add(plotter.NewGlyphBoxes())
	}
	return p.Save(9*vg.Inch, 5*vg.Inch, file)
}
