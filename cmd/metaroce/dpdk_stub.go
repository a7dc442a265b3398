//go:build !dpdk

package main

import (
	"io"

	"github.com/metaroce/metaroce/profile"
)

// Built without the dpdk tag, the command has no DPDK engine (that needs
// cgo and libdpdk: engine/dpdkengine). A profile, variable or flag that
// selects backend dpdk is then a configuration error (exit status 2),
// reported where the engine would have checked the dpdk section, after
// the rest of the profile has been validated.

// noDPDK is what such a configuration is told.
const noDPDK = "built without DPDK: rebuild with -tags dpdk"

// checkDPDK refuses backend dpdk; the dpdk section itself is not checked
// (its rules are the engine's).
func checkDPDK(cfg profile.Config, name string) error {
	if cfg.Backend != profile.BackendDPDK {
		return nil
	}
	return cfgErr("metaroce: %s: key backend: %s: %s", name, cfg.Backend, noDPDK)
}

// dpdkHost has no value in this build: startDPDK is its only constructor.
type dpdkHost struct{ peerFirst bool }

// startDPDK fails: commands reach it only for backend dpdk, which
// checkDPDK has refused already; this is the backstop.
func startDPDK(profile.Config, []string, bool, io.Writer) (*dpdkHost, error) {
	return nil, cfgErr("metaroce: backend dpdk: %s", noDPDK)
}

// opener is never called: no *dpdkHost exists in this build.
func (*dpdkHost) opener(profile.Config) opener {
	panic("metaroce: dpdkHost.opener without a DPDK engine (" + noDPDK + ")")
}

// shutdown of the nil host the commands hold: nothing to do.
func (*dpdkHost) shutdown() error { return nil }
