package main

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/metaroce/metaroce/profile"
)

// benchAxis picks the plot's x axis: the first swept parameter with more
// than one value (loss, size, paths, qps), loss when none is.
func benchAxis(s profile.Sweep) (string, func(benchPoint) float64) {
	switch {
	case len(s.Size) > 1:
		if len(s.Loss) <= 1 {
			return "message size [B]", func(p benchPoint) float64 { return float64(p.Size) }
		}
	case len(s.Paths) > 1 && len(s.Loss) <= 1:
		return "paths", func(p benchPoint) float64 { return float64(p.Paths) }
	case len(s.QPs) > 1 && len(s.Loss) <= 1:
		return "queue pairs", func(p benchPoint) float64 { return float64(p.QPs) }
	}
	return "injected loss [%]", func(p benchPoint) float64 { return p.Loss * 100 }
}

// writeBenchPlot draws goodput against the swept parameter, one line per
// transport (and per value of the other swept parameters), to b.Plot.
func writeBenchPlot(b profile.Bench, pts []benchPoint, cells [][]benchCell) (string, error) {
	xl, xf := benchAxis(b.Sweep)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: goodput, metaroce vs rocev2", b.Test)
	p.X.Label.Text, p.Y.Label.Text = xl, "goodput [Gb/s]"
	p.Legend.Left = true // bottom left: the lines run along the top
	var args []any
	for j, t := range b.Transports {
		series := map[string]plotter.XYs{}
		var order []string
		for i, pt := range pts {
			if j >= len(cells[i]) || (cells[i][j].err != nil && !cells[i][j].res.Partial) {
				continue
			}
			key := t
			if xl == "injected loss [%]" && (len(b.Sweep.Size) > 1 || len(b.Sweep.Paths) > 1 || len(b.Sweep.QPs) > 1) {
				key = fmt.Sprintf("%s %dB %dp %dq", t, pt.Size, pt.Paths, pt.QPs)
			}
			if _, ok := series[key]; !ok {
				order = append(order, key)
			}
			series[key] = append(series[key], plotter.XY{X: xf(pt), Y: cells[i][j].goodputGbps()})
		}
		for _, k := range order {
			args = append(args, k, series[k])
		}
	}
	if len(args) == 0 {
		return "", nil
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return "", err
	}
	p.Y.Min = 0
	if err := p.Save(8*vg.Inch, 5*vg.Inch, b.Plot); err != nil {
		return "", fmt.Errorf("plot %s: %w", b.Plot, err)
	}
	return b.Plot, nil
}
