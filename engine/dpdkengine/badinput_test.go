//go:build dpdk

package dpdkengine

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// badKind is one kind of bad input and the drop reason B must count for it
// (DropNone: it reaches the core, which must reject it: random payloads).
type badKind struct {
	name string
	want Drop
	make func(b []byte, rng *rand.Rand, a, bb PortInfo, udpPort uint16) int
}

func udpFrame(b []byte, rng *rand.Rand, from, to PortInfo, udpPort uint16, n int) int {
	for i := HdrLen; i < HdrLen+n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return WriteHeaders(b, &Header{SrcMAC: from.MAC, DstMAC: to.MAC, SrcIP: from.IP, DstIP: to.IP,
		SrcPort: 50000, DstPort: udpPort, SoftIPChecksum: true, SoftUDPChecksum: true}, n)
}

func fixIPSum(b []byte) {
	ip := b[EthHdrLen : EthHdrLen+IPv4HdrLen]
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:12], Checksum(ip, 0))
}

var badKinds = []badKind{
	{"runt", DropRunt, func(b []byte, rng *rand.Rand, _, _ PortInfo, _ uint16) int { return 1 + rng.IntN(EthHdrLen-1) }},
	{"short ip", DropRunt, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		udpFrame(b, rng, a, bb, p, 100)
		return EthHdrLen + 10
	}},
	{"non-ip", DropNonIP, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 200)
		binary.BigEndian.PutUint16(b[12:14], 0x86dd)
		return n
	}},
	{"bad arp", DropBadARP, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 40)
		binary.BigEndian.PutUint16(b[12:14], etherTypeARP)
		return n
	}},
	{"other mac", DropNotOurMAC, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		b[0] = 0x02
		b[5] ^= 0x55
		return n
	}},
	{"bad ip checksum", DropIPChecksum, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		b[EthHdrLen+10] ^= 0x01
		return n
	}},
	{"fragment", DropFragment, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		binary.BigEndian.PutUint16(b[EthHdrLen+6:], 0x2000) // more fragments
		fixIPSum(b)
		return n
	}},
	{"tcp", DropNotUDP, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		b[EthHdrLen+9] = 6
		fixIPSum(b)
		return n
	}},
	{"other ip", DropNotOurIP, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		to := bb
		to.IP = IPv4{10, 0, 0, 77}
		return udpFrame(b, rng, a, to, p, 300)
	}},
	{"wrong port", DropWrongPort, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		return udpFrame(b, rng, a, bb, p+1, 300)
	}},
	{"udp length", DropUDPLength, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		binary.BigEndian.PutUint16(b[EthHdrLen+IPv4HdrLen+4:], 100)
		return n
	}},
	{"bad udp checksum", DropUDPChecksum, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		n := udpFrame(b, rng, a, bb, p, 300)
		b[HdrLen+7] ^= 0x40
		return n
	}},
	{"random payload", DropNone, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		return udpFrame(b, rng, a, bb, p, 1+rng.IntN(1100))
	}},
	{"random payload from a stranger", DropNone, func(b []byte, rng *rand.Rand, a, bb PortInfo, p uint16) int {
		from := a
		from.IP = IPv4{10, 0, 0, 99}
		from.MAC = MAC{0x02, 1, 2, 3, 4, 5}
		return udpFrame(b, rng, from, bb, p, 1+rng.IntN(1100))
	}},
}

// blast sends rounds of every bad kind from port a's queue 1 to port b,
// during a transfer on queue 0, and returns how many of each it sent.
func blast(t *testing.T, a, b PortInfo, udpPort uint16, rounds int, stop <-chan struct{}) []int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, dpdk.RegisterThread())
	defer dpdk.UnregisterThread()
	pool, err := dpdk.NewPool("blaster", 1023, 0, 0)
	require.NoError(t, err)
	defer pool.Free()
	rng := rand.New(rand.NewPCG(7, 7))
	sent := make([]int, len(badKinds))
	ms := dpdk.NewMbufArray(len(badKinds))
	defer dpdk.FreeMbufArray(ms)
	for r := 0; r < rounds; r++ {
		require.NoError(t, pool.AllocBulk(ms))
		for k, bk := range badKinds {
			room := ms[k].Room()
			n := bk.make(room, rng, a, b, udpPort)
			ms[k].SetLen(n)
		}
		off := 0
		for off < len(ms) {
			off += a.ID.TxBurst(1, ms[off:])
		}
		for k := range badKinds {
			sent[k]++
		}
		select {
		case <-stop:
			return sent
		default:
		}
		runtime.Gosched()
	}
	return sent
}

func TestBadInputDuringTransfer(t *testing.T) {
	p := newMemifPair(t, 2, Impairment{}, 2, 1024)
	a, b := p.eng[0].Ports()[0], p.eng[1].Ports()[0]
	require.True(t, b.UDPSoft, "memif has no checksum offload: software checks")
	stop := make(chan struct{})
	sentCh := make(chan []int, 1)
	var epBefore metaroce.EndpointCounters
	require.NoError(t, p.sh[1].Do(func(verbs.Time) { epBefore = *p.ep[1].Counters() }))
	go func() { sentCh <- blast(t, a, b, p.eng[1].Config().UDPPort, 3000, stop) }()
	p.transfer(xfer{writeN: 2 << 20, sendN: 512 << 10, sendMsgs: 8, readN: 1 << 20}, 3)
	close(stop)
	sent := <-sentCh
	require.Greater(t, sent[0], 0)

	// Every bad frame is in B's counters by now unless still in flight: wait
	// until the port has delivered all of them.
	want := make(map[Drop]uint64)
	core := uint64(0)
	for k, bk := range badKinds {
		if bk.want == DropNone {
			core += uint64(sent[k])
		} else {
			want[bk.want] += uint64(sent[k])
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := p.sh[1].Counters()
		require.NoError(t, err)
		var ep metaroce.EndpointCounters
		require.NoError(t, p.sh[1].Do(func(verbs.Time) { ep = *p.ep[1].Counters() }))
		// A random payload fails the CRC, is malformed, or (its seal
		// flags set at random) disagrees with the endpoint's mode.
		rejected := ep.CRCDrops + ep.Malformed + ep.SealMismatch - epBefore.CRCDrops - epBefore.Malformed - epBefore.SealMismatch
		ok := rejected == core
		for d, n := range want {
			ok = ok && c.Drops[d] == n
		}
		if ok {
			t.Logf("sent %d rounds of %d bad kinds; B dropped %v; core rejected %d random payloads", sent[0], len(badKinds), c.DropMap(), rejected)
			break
		}
		require.True(t, time.Now().Before(deadline), "B counted drops %v and core rejects %d; want %v and %d", c.DropMap(), rejected, want, core)
		time.Sleep(time.Millisecond)
	}
	ca, _ := p.sh[0].Counters()
	require.Zero(t, ca.Dropped(), "A saw no bad input: %v", ca.DropMap())
}
