package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// devices is two RoCEv2 endpoints as verbs devices.
func devices(t *testing.T) (*mempair.Pair, verbs.Device, verbs.Device) {
	cfg := rocev2.Config{MTU: 1024}
	p, ea, eb := pair(t, cfg, cfg, memlink.Config{Seed: 28, Delay: 2000})
	return p, ea.Device(), eb.Device()
}

func TestDeregisterWithIOInFlightRevokes(t *testing.T) { verbstest.Revoke(t, devices) }

func TestDestroyOneQPOfASession(t *testing.T) { verbstest.DestroyOne(t, devices) }

// TestCorruptedPacketsAreDroppedAndRepaired: every corrupted packet fails
// the ICRC (or, corrupted where the ICRC does not reach, is malformed or
// names no QP) and is dropped; go-back-N repairs the loss.
func TestCorruptedPacketsAreDroppedAndRepaired(t *testing.T) {
	verbstest.Corruption(t, func(t *testing.T) (*mempair.Pair, verbs.Device, verbs.Device) {
		p, ea, eb := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 21, Corrupt: 0.05, Delay: 2000})
		return p, ea.Device(), eb.Device()
	}, func(p *mempair.Pair) uint64 {
		var n uint64
		for _, t := range p.T {
			c := t.(*rocev2.Endpoint).Counters()
			n += c.ICRCDrops + c.Malformed + c.UnknownQP
		}
		return n
	})
}
