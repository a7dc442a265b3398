//go:build dpdk

package dpdkengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemifAsymmetricEnds runs the checks that need the two ends of one
// pair configured differently on one pair (memif pairs are few: a closed
// port cannot be opened again): A sends with udp_checksum zero and
// ack_flush -1, B computes its checksums in software and flushes ACKs
// mid-burst by default (testAckFlush).
func TestMemifAsymmetricEnds(t *testing.T) {
	p := newMemifEnginesCfg(t, 13, Impairment{}, 1, func(i int, c *Config) {
		if i == 0 {
			c.UDPChecksum = "zero"
			c.AckFlush = -1
		} else {
			c.Checksum = "software"
		}
	}).withEndpoints(1024, 16)
	t.Run("udp_checksum", func(t *testing.T) { p.t = t; testUDPChecksumZero(t, p) })
	t.Run("ack_flush", func(t *testing.T) { p.t = t; testAckFlush(t, p) })
}

// testUDPChecksumZero: A sends with udp_checksum: zero, B computes
// its checksums in software. Every byte still lands (the core's CRC32C
// covers the packets), every datagram B delivered from A had checksum 0
// and went unverified, and A verified every one of B's (none was 0).
func testUDPChecksumZero(t *testing.T, p *memifPair) {
	a, b := p.eng[0].Ports()[0], p.eng[1].Ports()[0]
	require.True(t, a.UDPZero && !a.UDPSoft && !a.UDPOffload, "A sends no UDP checksum: %+v", a)
	require.True(t, !b.UDPZero && b.UDPSoft, "B computes its checksums: %+v", b)
	p.transfer(xfer{writeN: 1 << 20, sendN: 256 << 10, sendMsgs: 4, readN: 1 << 20}, 1)
	ca, err := p.sh[0].Counters()
	require.NoError(t, err)
	cb, err := p.sh[1].Counters()
	require.NoError(t, err)
	t.Logf("A: delivered %d, no UDP checksum %d; B: delivered %d, no UDP checksum %d",
		ca.RxDelivered, ca.RxNoUDPChecksum, cb.RxDelivered, cb.RxNoUDPChecksum)
	require.Greater(t, cb.RxDelivered, uint64(1000))
	require.Equal(t, cb.RxDelivered, cb.RxNoUDPChecksum, "every datagram from A had checksum 0")
	require.Greater(t, ca.RxDelivered, uint64(100))
	require.Zero(t, ca.RxNoUDPChecksum, "B's checksums are computed")
	require.Zero(t, ca.Dropped(), "A drops %v", ca.DropMap())
	require.Zero(t, cb.Dropped(), "B drops %v", cb.DropMap())
}
