package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/corelat"
	"github.com/spf13/cobra"
)

func newCorelatCmd() *cobra.Command {
	var cores string
	var rounds, trips int
	cmd := &cobra.Command{
		Use:   "corelat",
		Short: "Measure how long a cache line takes between two CPUs",
		Long: `corelat passes a counter between two threads pinned to two CPUs and prints
the time of one hop (one way), median, minimum and maximum over the rounds,
as one line:

  corelat: cores=0,1 median_ns=29.6 min_ns=29.1 max_ns=31.0 rounds=5 trips=100000

Run it before a benchmark on a shared machine: a hypervisor moves virtual
CPUs between cores that share a cache (tens of ns) and cores that do not
(over 100 ns) while you watch, and everything that moves data between the
two CPUs (memif, the two ends of perf) slows down with it.
scripts/dpdk-cells.sh records it before each run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, b, err := parseCores(cores)
			if err != nil {
				return &usageError{msg: err.Error()}
			}
			if rounds < 1 || rounds > 1000 || trips < 1 || trips > 100_000_000 {
				return &usageError{msg: fmt.Sprintf("corelat: --rounds %d, --trips %d: want 1..1000 and 1..100000000", rounds, trips)}
			}
			return runCorelat(cmd.OutOrStdout(), a, b, rounds, trips)
		},
	}
	cmd.Flags().StringVar(&cores, "cores", "0,1", "the two CPUs, A,B")
	cmd.Flags().IntVar(&rounds, "rounds", 5, "measurements; the line gives their median, minimum and maximum")
	cmd.Flags().IntVar(&trips, "trips", 100000, "round trips per measurement")
	return cmd
}

// parseCores reads "A,B".
func parseCores(s string) (int, int, error) {
	as, bs, ok := strings.Cut(s, ",")
	a, err1 := strconv.Atoi(strings.TrimSpace(as))
	b, err2 := strconv.Atoi(strings.TrimSpace(bs))
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 || a == b {
		return 0, 0, fmt.Errorf("corelat: --cores %q: want two different CPU numbers, A,B", s)
	}
	return a, b, nil
}

func runCorelat(w io.Writer, a, b, rounds, trips int) error {
	hops := make([]float64, 0, rounds)
	for range rounds {
		// A hop that waits for a time slice on a busy CPU takes
		// milliseconds; the limit only stops a peer that never runs.
		d, err := corelat.Measure(a, b, trips, time.Minute)
		if err != nil {
			return err
		}
		hops = append(hops, float64(d.Nanoseconds()))
	}
	slices.Sort(hops)
	med := hops[len(hops)/2]
	if len(hops)%2 == 0 {
		med = (hops[len(hops)/2-1] + med) / 2
	}
	_, err := fmt.Fprintf(w, "corelat: cores=%d,%d median_ns=%.1f min_ns=%.1f max_ns=%.1f rounds=%d trips=%d\n",
		a, b, med, hops[0], hops[len(hops)-1], rounds, trips)
	return err
}
