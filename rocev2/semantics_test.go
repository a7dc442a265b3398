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
