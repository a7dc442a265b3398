// Command metaroce is the project's one command-line tool.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "metaroce:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "metaroce",
		Short:         "A MetaRoCE-style RDMA transport for lossy Ethernet",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDemoCmd(), newSimCmd(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "metaroce", version) },
	})
	return root
}
