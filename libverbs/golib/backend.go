//go:build cgo && !dpdk

package main

import (
	"fmt"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/profile"
)

// newBackend opens the profile's backend: UDP only in a build without
// DPDK (make verbs builds with it where libdpdk is installed).
func newBackend(e endpoint) (engine.Backend, error) {
	if err := checkBackend(e.cfg); err != nil {
		return nil, err
	}
	return newUDPBackend(e)
}

// checkBackend refuses backend dpdk (at ibv_open_device).
func checkBackend(c profile.Config) error {
	if c.Backend == profile.BackendDPDK {
		return fmt.Errorf("metaroce verbs: backend %s: built without DPDK: rebuild with -tags dpdk (make verbs DPDK=1)", c.Backend)
	}
	return nil
}

// prestart has nothing to start ahead for a UDP socket: the transport
// opens it at the first PD or CQ.
func prestart(endpoint) error { return nil }
