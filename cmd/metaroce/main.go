// Command metaroce is the project's one command-line tool.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses: 1 for a failed run, 2 for a bad profile, environment
// variable, flag or argument (nothing was run).
const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ce *configError
	if errors.As(err, &ce) {
		fmt.Fprintln(os.Stderr, ce.msg)
		return exitUsage
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, "metaroce:", ue.msg)
		return exitUsage
	}
	fmt.Fprintln(os.Stderr, "metaroce:", err)
	return exitFailure
}

// usageError is a bad flag or argument.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "metaroce",
		Short: "A MetaRoCE-style RDMA transport for lossy Ethernet",
		Long: `metaroce: RDMA over UDP with multipath spraying, per-path SACK repair and
direct placement, and a RoCEv2 baseline to compare it with.

  metaroce bench [PROFILE]            A/B: metaroce vs rocev2 over the profile's backend
  metaroce perf write_bw              perftest-style server ...
  metaroce perf write_bw SERVER       ... and client
  metaroce stats ADDR                 counters of a running instance (--metrics-addr)
  metaroce sim FILE                   the fabric simulator
  metaroce demo                       the in-memory lossy-link demo
  metaroce corelat --cores 0,1        cache-line latency between two CPUs

Profiles are YAML (configs/*.yaml); the embedded default is
configs/loopback-udp.yaml. Keys are overridden by METAROCE_* variables
(METAROCE_UDP_LOSS=0.01 for udp.loss) and by flags (--set udp.loss=0.01).
A bad key or value exits with status 2.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	root.AddCommand(newDemoCmd(), newSimCmd(), newPerfCmd(), newBenchCmd(), newStatsCmd(), newCorelatCmd(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "metaroce", version) },
	})
	return root
}
