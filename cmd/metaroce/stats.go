package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
)

func newStatsCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "stats ADDR",
		Short: "Print the counters of a running instance (started with --metrics-addr ADDR)",
		Long: `stats reads the Prometheus endpoint of a running metaroce (perf or bench
started with --metrics-addr host:port) and prints its metaroce_* series as a
table: the backend's counters, per connection, and (with --paths) per path.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStats(cmd.OutOrStdout(), args[0], all)
		},
	}
	cmd.Flags().BoolVar(&all, "paths", false, "also print the per-path series")
	return cmd
}

func runStats(w io.Writer, addr string, paths bool) error {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + addr + "/metrics"
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stats: %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("stats: %s: %w", url, err)
	}
	var names []string
	for n := range fams {
		if strings.HasPrefix(n, "metaroce_") && (paths || !strings.HasPrefix(n, "metaroce_path_")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fmt.Errorf("stats: %s has no metaroce_* series (is a run in progress?)", url)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tlabels\tvalue")
	for _, n := range names {
		for _, m := range fams[n].GetMetric() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", n, labelString(m.GetLabel()), valueString(m))
		}
	}
	return tw.Flush()
}

func labelString(ls []*dto.LabelPair) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func valueString(m *dto.Metric) string {
	switch {
	case m.Counter != nil:
		return fmt.Sprintf("%.0f", m.Counter.GetValue())
	case m.Gauge != nil:
		return fmt.Sprintf("%g", m.Gauge.GetValue())
	}
	return "?"
}
