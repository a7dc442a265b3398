package metaroce_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// devices is two metaroce endpoints as verbs devices over a lossy link.
func devices(t *testing.T) (*mempair.Pair, verbs.Device, verbs.Device) {
	cfg := mr.Config{MTU: 1024, Paths: 4}
	p, err := mempair.New(cfg, cfg, memlink.Config{Seed: 5, Loss: 0.05, Delay: 2000})
	require.NoError(t, err)
	return p, p.EP[0].Device(), p.EP[1].Device()
}

func TestDeregisterWithIOInFlightRevokes(t *testing.T) { verbstest.Revoke(t, devices) }

func TestDestroyOneQPOfASession(t *testing.T) { verbstest.DestroyOne(t, devices) }

// TestCorruptedPacketsAreDroppedAndRepaired: every corrupted packet fails
// the CRC and is dropped; loss repair delivers the data.
func TestCorruptedPacketsAreDroppedAndRepaired(t *testing.T) {
	verbstest.Corruption(t, func(t *testing.T) (*mempair.Pair, verbs.Device, verbs.Device) {
		cfg := mr.Config{Paths: 4}
		p, err := mempair.New(cfg, cfg, memlink.Config{Seed: 7, Corrupt: 0.05, Delay: 2000})
		require.NoError(t, err)
		return p, p.EP[0].Device(), p.EP[1].Device()
	}, func(p *mempair.Pair) uint64 { return p.EP[0].Counters().CRCDrops + p.EP[1].Counters().CRCDrops })
}
