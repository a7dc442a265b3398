package metaroce_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Attacks on admission and teardown, in the library with the core's own
// packets (docs/protocol.md; issue 15). Each forgery is built as the
// attacker would: a valid header and CRC, chosen ids.

// forge builds a header-only packet (plus an optional extension).
func forge(h mr.Header, ext []byte) []byte {
	b := make([]byte, mr.HeaderLen+len(ext)+mr.CRCLen)
	h.Put(b)
	copy(b[mr.HeaderLen:], ext)
	n := mr.SealCRC(b, mr.HeaderLen+len(ext))
	return b[:n]
}

// forgeConnect is a CONNECT from node inc with connection id src asking
// for paths paths.
func forgeConnect(node mr.NodeID, inc mr.Incarnation, src mr.ConnID, paths int) []byte {
	body := make([]byte, mr.ConnectLen)
	(&mr.ConnectBody{Node: node, Paths: uint16(paths), MTU: 4096, Streams: 16, Planes: 1}).Put(body)
	return forge(mr.Header{Opcode: mr.OpConnect, SrcConn: src, Incarnation: inc}, body)
}

// transfer posts one WRITE of n bytes of a pattern A->B and returns a
// function that reports whether it completed (failing the test on an
// error status) and the destination buffer.
func (f *fixture) transfer(t *testing.T, n int) (done func() bool, src, dst []byte) {
	t.Helper()
	src = make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	ms, err := f.pa.RegisterMR(src, 0)
	require.NoError(t, err)
	target, dst := region(t, f.pb, n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	f.post(t, verbs.SendWR{ID: 99, Opcode: verbs.WRWrite, Local: ms.SGE(0, n), RemoteAddr: target.Addr(), RKey: target.RKey()})
	var wc [1]verbs.WorkCompletion
	finished := false
	return func() bool {
		if !finished && f.cqa.Poll(wc[:]) == 1 {
			require.Equal(t, verbs.StatusSuccess, wc[0].Status, "%+v", wc[0])
			finished = true
		}
		return finished
	}, src, dst
}

// TestSpoofedConnectDoesNotDisturbPeer: CONNECTs naming A's node with a
// new incarnation (as a restarted A would send), from A's own address and
// from another, arrive at B in the middle of a transfer. Restart detection
// waits for proof that the new incarnation is there (its first packet
// after our ACCEPT) and looks at A's address only, so A's connection stays
// up and the transfer completes with every byte right.
func TestSpoofedConnectDoesNotDisturbPeer(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 41})
	done, src, dst := f.transfer(t, 1<<20)
	before := f.cb.Counters().PayloadPlaced
	require.NoError(t, f.p.RunUntil(func() bool { return f.cb.Counters().PayloadPlaced > before }, f.p.Now+1e9))
	node := f.cb.PeerNode()
	for i, from := range []verbs.PeerHandle{0, 7} {
		pkt := forgeConnect(node, 0x7777+mr.Incarnation(i), f.ca.LocalID()+100, 4)
		f.p.EP[1].Receive(f.p.Now, pkt, verbs.RxMeta{Peer: from})
	}
	require.Equal(t, 3, f.p.EP[1].Connections(), "the two forged CONNECTs were accepted (half-open), so the check checked them")
	require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
	require.Equal(t, src, dst)
	require.True(t, f.ca.Established() && f.cb.Established(), "A: %s, B: %s (%v)", f.ca.State(), f.cb.State(), f.cb.FailReason())
	require.Zero(t, f.p.EP[1].Counters().PeerRestarts)
}

// TestBlindCloseFromElsewhereDoesNothing: CLOSEs (and RESETs) with small
// guesses of the connection ids and the right ones, and the right
// incarnation, from an address that is not A's: dropped and counted, the
// connection stays up.
func TestBlindCloseFromElsewhereDoesNothing(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 42})
	staleBefore := f.cb.Counters().StalePackets
	n := 0
	ids := func(first mr.ConnID, real mr.ConnID) []mr.ConnID {
		var v []mr.ConnID
		for id := first; id <= 8; id++ {
			v = append(v, id)
		}
		return append(v, real)
	}
	for _, dst := range ids(1, f.cb.LocalID()) {
		for _, src := range ids(0, f.ca.LocalID()) {
			for _, op := range []mr.Opcode{mr.OpClose, mr.OpReset} {
				pkt := forge(mr.Header{Opcode: op, DstConn: dst, SrcConn: src, Incarnation: 1}, nil)
				f.p.EP[1].Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 9})
				n++
			}
		}
	}
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	require.True(t, f.ca.Established() && f.cb.Established(), "A: %s, B: %s (%v)", f.ca.State(), f.cb.State(), f.cb.FailReason())
	require.Greater(t, f.cb.Counters().StalePackets, staleBefore, "the forgeries that named B's connection were counted")
	require.Equal(t, 2*9*10, n)
	done, src, dst := f.transfer(t, 64<<10)
	require.NoError(t, f.p.RunUntil(done, f.p.Now+1e9))
	require.Equal(t, src, dst)
}

// TestConnectFloodBoundedMemory: 1,000,000 forged CONNECTs (from A's own
// address, the worst case: their ACCEPTs go to A) arrive at B during a
// 4 MiB transfer. Unproven connections hold no path state and at most
// MaxHalfOpen of them exist, so B's heap grows by less than 64 MiB, and
// the transfer completes with every byte right.
func TestConnectFloodBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 CONNECTs")
	}
	const forged = 1_000_000
	f := newFixture(t, mr.Config{Paths: 16}, memlink.Config{Seed: 43})
	done, src, dst := f.transfer(t, 4<<20)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	start := time.Now()
	peak := uint64(0)
	for i := 0; i < forged; i++ {
		// Every CONNECT a different incarnation and id: none is a repeat.
		pkt := forgeConnect(mr.NodeID(1000+i%5), mr.Incarnation(i), mr.ConnID(i+1), 16)
		f.p.EP[1].Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
		if i%64 == 63 {
			f.p.Step()
		}
		if i%100_000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	require.NoError(t, f.p.RunUntil(done, f.p.Now+20e9))
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(heap0)
	t.Logf("%d CONNECTs in %v: heap %+.1f MiB after GC (peak sampled %+.1f MiB), B holds %d connections, evicted %d",
		forged, elapsed, float64(grown)/(1<<20), float64(int64(peak)-int64(heap0))/(1<<20),
		f.p.EP[1].Connections(), f.p.EP[1].Counters().HalfOpenEvicted)
	require.Less(t, grown, int64(64<<20))
	require.Equal(t, src, dst)
	require.True(t, f.ca.Established() && f.cb.Established())
	require.LessOrEqual(t, f.p.EP[1].Connections(), f.p.EP[1].Config().MaxHalfOpen+1)
	require.Greater(t, f.p.EP[1].Counters().HalfOpenEvicted, uint64(forged/2))
	runtime.KeepAlive(f)
}

// TestConnectCostsNoPathState: 15,000 CONNECTs asking for 256 paths, none
// answered, cost a bounded, small amount each (no path state), and the
// allocations of one CONNECT do not grow with the table.
func TestConnectCostsNoPathState(t *testing.T) {
	const n = 15000
	b, err := mr.NewEndpoint(mr.Config{Node: 2, Incarnation: 2, Paths: 256, AcceptIncoming: true, MaxHalfOpen: 2 * n})
	require.NoError(t, err)
	buf := make([]byte, b.MaxPacketLen())
	connect := func(i int) {
		b.Receive(0, forgeConnect(mr.NodeID(i%7+10), mr.Incarnation(i), mr.ConnID(i+1), 256), verbs.RxMeta{Peer: 3})
		for {
			if _, ok := b.NextPacket(0, buf); !ok {
				break
			}
		}
	}
	first := testing.AllocsPerRun(50, func() { connect(int(b.Counters().RxPackets) + 1<<20) })
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	for i := 0; i < n; i++ {
		connect(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := (int64(ms.HeapAlloc) - int64(heap0)) / n
	later := testing.AllocsPerRun(50, func() { connect(int(b.Counters().RxPackets) + 1<<21) })
	t.Logf("%d connections: %d bytes each; %.1f allocations per CONNECT first, %.1f after", b.Connections(), per, first, later)
	require.GreaterOrEqual(t, b.Connections(), n)
	require.Less(t, per, int64(8<<10), "bytes per unanswered CONNECT (256 paths of state would be ~124 KiB)")
	require.LessOrEqual(t, later, first+1, "allocations per CONNECT grew with the table")
}

// TestResetsRateLimited: packets for unknown connections are answered
// with RESETs at most ResetBurst at once and ResetRate per second, each no
// larger than the packet that provoked it.
func TestResetsRateLimited(t *testing.T) {
	b, err := mr.NewEndpoint(mr.Config{Node: 2, Incarnation: 2, AcceptIncoming: true, ResetBurst: 10, ResetRate: 1000})
	require.NoError(t, err)
	buf := make([]byte, b.MaxPacketLen())
	probe := forge(mr.Header{Opcode: mr.OpKeepalive, DstConn: 77, SrcConn: 5, Incarnation: 1}, nil)
	sent := func(now verbs.Time, k int) int {
		n := 0
		for i := 0; i < k; i++ {
			b.Receive(now, probe, verbs.RxMeta{Peer: 1})
		}
		for {
			meta, ok := b.NextPacket(now, buf)
			if !ok {
				return n
			}
			require.Equal(t, byte(mr.OpReset), buf[1])
			require.LessOrEqual(t, meta.Len, len(probe))
			n++
		}
	}
	require.Equal(t, 10, sent(0, 100), "a burst")
	require.Equal(t, 5, sent(verbs.Time(5*time.Millisecond), 100), "5 ms at 1000/s")
	require.Equal(t, uint64(15), b.Counters().ResetsSent)
	require.Equal(t, uint64(185), b.Counters().ResetsLimited)
}

// TestRefusalsOnTheWire: a CONNECT over MaxConnsPerPeer (or MaxConns) is
// refused with a RESET (the client's Connect fails with FailRefused), and
// counted by its reason.
func TestRefusalsOnTheWire(t *testing.T) {
	f := newFixture(t, mr.Config{MaxConnsPerPeer: 1, MaxConns: 8}, memlink.Config{Seed: 44})
	c, err := f.p.EP[0].Connect(f.p.Now, 1)
	require.NoError(t, err)
	require.NoError(t, f.p.RunUntil(func() bool { return c.State() == "failed" }, f.p.Now+1e9))
	require.Equal(t, verbs.FailRefused, c.FailReason())
	require.Equal(t, uint64(1), f.p.EP[1].Counters().RefusedPerPeer)
	require.Equal(t, uint64(1), f.p.EP[1].Counters().ConnectsRefused)
	require.True(t, f.ca.Established() && f.cb.Established())
}

// BenchmarkConnect is the cost of one unanswered CONNECT (256 paths asked
// for, its ACCEPT built) with an empty table and with 15,000 connections
// already there: the checks use indexes, so both cost the same.
func BenchmarkConnect(b *testing.B) {
	for _, table := range []int{0, 15000} {
		b.Run("table="+strconv.Itoa(table), func(b *testing.B) {
			e, err := mr.NewEndpoint(mr.Config{Node: 2, Incarnation: 2, Paths: 256, AcceptIncoming: true,
				MaxHalfOpen: table + 1024}) // the table keeps its size: each CONNECT evicts the oldest
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, e.MaxPacketLen())
			connect := func(i int) {
				e.Receive(0, forgeConnect(mr.NodeID(i%7+10), mr.Incarnation(i), mr.ConnID(i+1), 256), verbs.RxMeta{Peer: 3})
				for {
					if _, ok := e.NextPacket(0, buf); !ok {
						break
					}
				}
			}
			for i := 0; i < table; i++ {
				connect(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				connect(table + i)
			}
		})
	}
}

// TestBlindResetFromPeerAddressFails: RESETs and CLOSEs that come from A's
// own address (a spoofed source) with A's incarnation, guessing the two
// connection ids: sequential guesses (as the ids were before they were
// random) and uniformly random ones. Both ids are 32 random bits, so a try
// succeeds with probability 2^-64 (2^-32 when the attacker knows one of
// them): none of 200,000 ends the connection, and the same RESET with the
// right ids does, so the check is live.
func TestBlindResetFromPeerAddressFails(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 43})
	b := f.p.EP[1]
	staleBefore, unknownBefore := f.cb.Counters().StalePackets, b.Counters().UnknownConn
	guess := verbs.NewSeededRandom(4343)
	const tries = 200_000
	hits := 0 // guesses that named B's connection (dst right)
	for i := range tries {
		dst, src := mr.ConnID(i/64+1), mr.ConnID(i%64) // sequential for the first half
		if i >= tries/2 {
			x := guess.Uint64()
			dst, src = mr.ConnID(x), mr.ConnID(x>>32)
		}
		if dst == f.cb.LocalID() {
			hits++
		}
		op := mr.OpReset
		if i%2 == 1 {
			op = mr.OpClose
		}
		b.Receive(f.p.Now, forge(mr.Header{Opcode: op, DstConn: dst, SrcConn: src, Incarnation: f.p.EP[0].Config().Incarnation}, nil),
			verbs.RxMeta{Peer: 0})
		require.True(t, f.cb.Established(), "try %d (%v dst %#x src %#x) ended the connection: %v", i, op, dst, src, f.cb.FailReason())
	}
	// Every try was looked at: as an unknown connection or as stale.
	looked := (b.Counters().UnknownConn - unknownBefore) + (f.cb.Counters().StalePackets - staleBefore)
	require.Equal(t, uint64(tries), looked)
	t.Logf("%d tries, %d named B's connection id, 0 ended it (p per try = 2^-64 by the ids' entropy)", tries, hits)
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	done, src, dst := f.transfer(t, 64<<10)
	require.NoError(t, f.p.RunUntil(done, f.p.Now+1e9))
	require.Equal(t, src, dst)

	// Knowing both ids (what an observer of any packet but the handshake
	// sees), a RESET and a CLOSE still do nothing: they must prove B's
	// token (64 bits of tag), and are counted.
	bad := f.cb.Counters().BadTags
	for _, op := range []mr.Opcode{mr.OpReset, mr.OpClose} {
		b.Receive(f.p.Now, forge(mr.Header{Opcode: op, DstConn: f.cb.LocalID(), SrcConn: f.ca.LocalID(),
			Incarnation: f.p.EP[0].Config().Incarnation}, nil), verbs.RxMeta{Peer: 0})
	}
	require.True(t, f.cb.Established(), "a RESET or CLOSE without the token ended the connection: %v", f.cb.FailReason())
	require.Equal(t, bad+2, f.cb.Counters().BadTags)

	// The control: with the proof (what the peer has), the same RESET ends
	// the connection.
	pkt := forge(mr.Header{Opcode: mr.OpReset, DstConn: f.cb.LocalID(), SrcConn: f.ca.LocalID(),
		Incarnation: f.p.EP[0].Config().Incarnation}, nil)
	mr.ProveTo(f.cb, pkt, mr.HeaderLen)
	mr.SealCRC(pkt, mr.HeaderLen)
	b.Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
	require.False(t, f.cb.Established(), "a RESET with the right ids and token from the peer's address must end the connection")
}

// TestRestartNeedsProof: a CONNECT in A's name with a new incarnation,
// from A's own address, then packets on the connection it opened, by an
// attacker who knows B's new connection id (the ACCEPT went to A): an
// untagged KEEPALIVE and NOPs at guessed PSNs fail none of A's
// connections. Only the proof of B's new token, which went to A's address
// alone (64 bits to guess), makes it a restart: the control.
func TestRestartNeedsProof(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 45})
	b := f.p.EP[1]
	// A's proof of B's token is in (it fails whatever half-open connection
	// of another incarnation of A's is there: a forged one).
	t0 := f.p.Now
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Now > t0+100_000 && f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	const inc = mr.Incarnation(0x5151)
	b.Receive(f.p.Now, forgeConnect(f.cb.PeerNode(), inc, 0x4242, 4), verbs.RxMeta{Peer: 0})
	forged, ok := b.Accept()
	require.True(t, ok, "the forged CONNECT was accepted (half-open)")
	hdr := mr.Header{DstConn: forged.LocalID(), SrcConn: 0x4242, Incarnation: inc}
	h := hdr
	h.Opcode = mr.OpKeepalive
	b.Receive(f.p.Now, forge(h, nil), verbs.RxMeta{Peer: 0})
	guess := verbs.NewSeededRandom(45)
	for i := 0; i < 1000; i++ {
		h := hdr
		h.Opcode, h.Flags, h.Path, h.PSN = mr.OpNop, mr.FlagAckReq, verbs.PathID(i%4), mr.PSN(guess.Uint64())
		b.Receive(f.p.Now, forge(h, nil), verbs.RxMeta{Peer: 0})
	}
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	require.Zero(t, b.Counters().PeerRestarts)
	require.True(t, f.cb.Established(), "B's connection to A: %v", f.cb.FailReason())
	require.Equal(t, uint64(1), forged.Counters().BadTags)
	require.Equal(t, uint64(1000), forged.Counters().OutOfWindow)
	done, src, dst := f.transfer(t, 64<<10)
	require.NoError(t, f.p.RunUntil(done, f.p.Now+1e9))
	require.Equal(t, src, dst)

	// The control: the same KEEPALIVE with the proof is a restart.
	h = hdr
	h.Opcode = mr.OpKeepalive
	pkt := forge(h, nil)
	mr.ProveTo(forged, pkt, mr.HeaderLen)
	mr.SealCRC(pkt, mr.HeaderLen)
	b.Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
	require.Equal(t, uint64(1), b.Counters().PeerRestarts)
	require.False(t, f.cb.Established())
	require.Equal(t, verbs.FailPeerRestart, f.cb.FailReason())
}
