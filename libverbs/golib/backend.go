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
	if e.cfg.Backend == profile.BackendDPDK {
		return nil, fmt.Errorf("backend %s: built without DPDK: rebuild with -tags dpdk (make verbs DPDK=1)", e.cfg.Backend)
	}
	return newUDPBackend(e)
}
