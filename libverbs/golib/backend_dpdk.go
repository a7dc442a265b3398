//go:build cgo && dpdk

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/internal/transports"
	"github.com/metaroce/metaroce/profile"
)

// newBackend opens the profile's backend: UDP, or a backend on the DPDK
// engine that prestart started (as `metaroce perf` runs it: the EAL
// started once, on the engine thread, which stays in Run; the transport
// and the program's posted work run on the engine's shard).
func newBackend(e endpoint) (engine.Backend, error) {
	if e.cfg.Backend != profile.BackendDPDK {
		return newUDPBackend(e)
	}
	if dpdkEng == nil {
		if err := startDPDK(e); err != nil {
			return nil, err
		}
	}
	return dpdkEng.Backend(), nil
}

// dpdkEng is the process's DPDK engine (engine thread only).
var dpdkEng *dpdkengine.Engine

// prestart starts the EAL and the DPDK ports at ibv_open_device, on the
// engine thread: the device is the port. A memif pair needs it: a memif
// client that connects before its server's port has started is never
// answered, and programs open their device before their out-of-band
// exchange, so each end's port runs before the other end can know it.
// The rest (the shard, the transport, the wait for the link) starts at
// the first PD or CQ, as on UDP.
func prestart(e endpoint) error {
	if e.cfg.Backend != profile.BackendDPDK {
		return nil
	}
	done := make(chan error, 1)
	onEngineThread(func() {
		if dpdkEng != nil {
			done <- nil
			return
		}
		done <- startDPDK(e)
	})
	return <-done
}

// startDPDK starts the engine on the profile's dpdk section (engine
// thread only).
func startDPDK(e endpoint) error {
	cfg := engineConfig(e.cfg)
	var err error
	// A memif client port starts only once its server listens: retry
	// that start for a while (the server may be starting too).
	for end := time.Now().Add(memifWait); ; time.Sleep(50 * time.Millisecond) {
		dpdkEng, err = dpdkengine.Start(cfg, os.Stderr)
		if err == nil || !memifNotYet(err) || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		dpdkEng = nil
		return fmt.Errorf("metaroce verbs: %v", err)
	}
	return nil
}

// memifWait bounds how long a memif client's start waits for its server.
const memifWait = 15 * time.Second

// memifNotYet reports a memif client port that could not start because
// its server is not listening yet.
func memifNotYet(err error) bool {
	s := err.Error()
	return strings.Contains(s, "net_memif") && strings.Contains(s, "rte_eth_dev_start")
}

// engineConfig is the profile's dpdk section as the engine's
// configuration, all of dpdk.ports (the CLI's conversion).
func engineConfig(c profile.Config) dpdkengine.Config {
	return transports.EngineConfig(c.DPDK, 0, len(c.DPDK.Ports), c.Transport)
}

// checkBackend validates the dpdk section with the engine's own rules
// (at ibv_open_device, before anything starts).
func checkBackend(c profile.Config) error {
	if c.Backend != profile.BackendDPDK {
		return nil
	}
	if err := engineConfig(c).Validate(); err != nil {
		return fmt.Errorf("metaroce verbs: %v", err)
	}
	return nil
}
