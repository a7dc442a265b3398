//go:build dpdk

package dpdkengine

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/metaroce/metaroce/dpdk"
)

// Shutdown ends the engine and the EAL: it stops the shards and lcore
// loops (which free every mbuf they hold), stops and closes the ports,
// frees the pool and calls rte_eal_cleanup (which also removes the EAL's
// runtime directory). The EAL cannot be started again in this process.
func (e *Engine) Shutdown() error {
	return errors.Join(e.Close(), dpdk.Cleanup())
}

// OnSignal starts catching SIGINT and SIGTERM at once (from then on they
// no longer kill the process) and returns wait, which blocks until one
// arrives or ctx ends, then shuts everything down (Shutdown) and returns
// the signal (nil when ctx ended). Memory regions the application
// registered must be freed only after wait returns.
func (e *Engine) OnSignal() (wait func(ctx context.Context) (os.Signal, error)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return func(ctx context.Context) (os.Signal, error) {
		defer signal.Stop(ch)
		var sig os.Signal
		select {
		case sig = <-ch:
		case <-ctx.Done():
		}
		return sig, e.Shutdown()
	}
}
