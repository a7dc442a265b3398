package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/sim/report"
)

type simOpts struct {
	sets     []string
	json     bool
	out      string
	pcap     string
	pcapHost int
	parallel int
	progress string
}

func newSimCmd() *cobra.Command {
	o := simOpts{}
	cmd := &cobra.Command{
		Use:   "sim FILE",
		Short: "Run a simulated fabric experiment (configs/experiments/*.yaml)",
		Long: `sim runs an experiment file on the deterministic fabric simulator: the real
protocol cores as hosts on a modelled leaf-spine / multi-plane fabric, every
available transport side by side. Results are in virtual time on the modelled
fabric, not measurements of this machine; the same file and seed always give
the same numbers. docs/sim.md describes the model, the files and every field.

  metaroce sim configs/experiments/loss-sweep.yaml
  metaroce sim configs/experiments/incast.yaml --set workload.senders=8 --json
  metaroce sim configs/experiments/plane-failure.yaml --out out/ --pcap pf.pcap`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSim(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, cmd.Flags().Changed("pcap-host"))
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.sets, "set", nil, "override a key of the file: key=value (dotted key; sweep.<key>=[v1,v2] replaces a sweep); repeatable")
	f.BoolVar(&o.json, "json", false, "print one JSON object per result row instead of a table")
	f.StringVar(&o.out, "out", "", "write <experiment>.csv, <experiment>-series.csv, <experiment>.jsonl and PNG plots into this directory")
	f.StringVar(&o.pcap, "pcap", "", "write the packets seen at one host's NIC (pcap.host, or --pcap-host) in run pcap.run to this pcap file")
	f.IntVar(&o.pcapHost, "pcap-host", 0, "host whose NIC --pcap captures (overrides pcap.host)")
	f.IntVar(&o.parallel, "parallel", 0, "runs at once (default: one per CPU)")
	f.StringVar(&o.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal and the run takes over 2s), always, never")
	return cmd
}

func runSim(stdout, stderr io.Writer, file string, o simOpts, pcapHostSet bool) error {
	sets := o.sets
	if pcapHostSet {
		sets = append(append([]string{}, sets...), fmt.Sprintf("pcap.host=%d", o.pcapHost))
	}
	exp, err := sim.Load(file, sets)
	if err != nil {
		// An experiment file that cannot be read, or names an unknown key
		// or a bad value, is a configuration error: one line, exit 2.
		return cfgErr("metaroce: %v", err)
	}
	opts := sim.Options{Parallel: o.parallel, Progress: &sim.Progress{}}
	var pw *pcapSink
	if o.pcap != "" {
		if pw, err = newPcapSink(o.pcap, exp.Cfg.Pcap.Snaplen, exp.Cfg.Pcap.MaxPackets); err != nil {
			return err
		}
		opts.Capture = pw.frame
	}
	stop := startProgress(stderr, opts.Progress, o.progress)
	res, err := exp.Execute(opts)
	stop()
	if pw != nil {
		if cerr := pw.close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	if o.json {
		if err := res.WriteJSON(stdout); err != nil {
			return err
		}
	} else if err := report.WriteTable(stdout, res); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		files, err := report.WriteCSV(res, o.out)
		if err != nil {
			return err
		}
		jf, err := res.WriteJSONFile(o.out)
		if err != nil {
			return err
		}
		files = append(files, jf)
		pngs, err := report.WritePlots(res, o.out)
		if err != nil {
			return err
		}
		files = append(files, pngs...)
		fmt.Fprintf(stderr, "wrote %s\n", strings.Join(files, ", "))
	}
	if pw != nil {
		fmt.Fprintf(stderr, "wrote %s (%d packets)\n", o.pcap, pw.count)
	}
	return nil
}

// startProgress draws a progress bar on stderr while the experiment runs:
// only when stderr is a terminal (mode auto) and only once the run has
// taken 2s, so quick runs and redirected output stay clean. The returned
// function stops it and clears the line.
func startProgress(w io.Writer, p *sim.Progress, mode string) func() {
	show := mode == "always"
	if mode == "auto" {
		f, ok := w.(*os.File)
		show = ok && term.IsTerminal(int(f.Fd()))
	}
	if !show {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		drawn := false
		for {
			select {
			case <-done:
				if drawn {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-tick.C:
				el := time.Since(start)
				if el < 2*time.Second && mode == "auto" {
					continue
				}
				frac := p.Fraction()
				const width = 30
				n := int(frac * width)
				eta := ""
				if frac > 0.01 {
					eta = fmt.Sprintf(" eta %s", (time.Duration(float64(el)/frac) - el).Round(time.Second))
				}
				fmt.Fprintf(w, "\r[%s%s] %3.0f%% %s%s\033[K", strings.Repeat("#", n), strings.Repeat(" ", width-n),
					frac*100, el.Round(time.Second), eta)
				drawn = true
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
