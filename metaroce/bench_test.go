package metaroce_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// packetPathShape is one configuration of the packet-path benchmark: the
// number of paths of the measured connection, the streams that carry its
// work, the connections each of the two endpoints holds, and the payload
// of a data packet (ppMTU, or one small message per packet).
type packetPathShape struct {
	paths, streams, conns int
	payload               int
	mode                  mr.SecurityMode // none, or the sealed modes (seal.go)
	scatter               int             // > 0: a sends by NextPacketScatter with this threshold (scatter.go)
	coalesce              int             // > 1: a's datagrams carry up to this many packets (coalesce.go)
}

func (s packetPathShape) String() string {
	name := fmt.Sprintf("paths=%d/streams=%d/conns=%d", s.paths, s.streams, s.conns)
	if s.payload != ppMTU {
		name += fmt.Sprintf("/payload=%d", s.payload)
	}
	if s.mode != mr.SecurityNone {
		name += "/mode=" + s.mode.String()
	}
	if s.scatter > 0 {
		name += "/scatter"
	}
	if s.coalesce > 1 {
		name += fmt.Sprintf("/coalesce=%d", s.coalesce)
	}
	return name
}

// msgLen is the length of the WRITEs the shape posts: ppMsgLen (four full
// packets) for MTU-sized payloads, one packet's payload otherwise.
func (s packetPathShape) msgLen() int {
	if s.payload == ppMTU {
		return ppMsgLen
	}
	return s.payload
}

// packetPathShapes is the benchmark matrix (issue 12: 8, 64 and 256 paths,
// 1 and 1024 streams, 1 and 4000 connections per endpoint), all with 4 KiB
// payloads, and the two corners of it with 64-byte messages (issue 16:
// the small-message cost, where the per-packet work is all there is). The
// per-packet cost must not depend on paths, streams or connections.
func packetPathShapes() []packetPathShape {
	var out []packetPathShape
	for _, p := range []int{8, 64, 256} {
		for _, s := range []int{1, 1024} {
			for _, c := range []int{1, 4000} {
				out = append(out, packetPathShape{p, s, c, ppMTU, mr.SecurityNone, 0, 0})
			}
		}
	}
	out = append(out, packetPathShape{8, 1, 1, 64, mr.SecurityNone, 0, 0}, packetPathShape{256, 1024, 4000, 64, mr.SecurityNone, 0, 0})
	// The sealed modes (issue 15) beside the first shape, at both sizes:
	// what a tag (and enciphering) adds per packet.
	for _, m := range []mr.SecurityMode{mr.SecurityAuth, mr.SecurityEncrypt} {
		out = append(out, packetPathShape{8, 1, 1, ppMTU, m, 0, 0}, packetPathShape{8, 1, 1, 64, m, 0, 0})
	}
	// The scatter form (issue 16: zero-copy TX) beside the copying form at
	// 256 B, 1 KiB and 4 KiB: the sender hands the payload out by
	// reference and the benchmark's "wire" assembles the packet, as a
	// driver that copies segments into its ring (memif) does.
	for _, p := range []int{256, 1024, ppMTU} {
		if p != ppMTU {
			out = append(out, packetPathShape{8, 1, 1, p, mr.SecurityNone, 0, 0})
		}
		out = append(out, packetPathShape{8, 1, 1, p, mr.SecurityNone, 1, 0})
	}
	// Coalescing (coalesce.go) beside the plain 64-byte shape: what
	// packing 64-byte messages into shared datagrams costs or saves the
	// core per packet (a backend saves its per-frame cost on top).
	out = append(out, packetPathShape{8, 1, 1, 64, mr.SecurityNone, 0, 16})
	return out
}

// The offered load is the same in every shape: ppDepth WRITEs of ppMsgLen
// bytes are kept outstanding, posted to the streams in turn, so with 1024
// streams every stream has work queued (and is in the connection's round
// robin) while the number of packets queued and in flight does not change.
const (
	ppDepth  = 1024
	ppMsgLen = 16 << 10
	ppMTU    = 4096
)

// packetPath drives one data connection between endpoints a and z in one
// goroutine, with no network in between: every packet is handed to its
// destination at once and virtual time moves 500 ns per round.
//
// Idle connections (conns > 1) make the endpoints hold conns connections
// each: a dials endpoint y, x dials z. They have one path each (y and x
// offer one), so that 4000 of them stay small; what they exercise is the
// endpoint's own per-connection structures (connection table, timer heap,
// ready list). Keepalives are pushed out of the measured span (an hour) on
// every shape alike, so idle connections cost nothing per packet there.
type packetPath struct {
	tb    testing.TB
	eps   []*mr.Endpoint // a, z, x, y: the index is the peer handle
	buf   []byte
	now   verbs.Time
	data  int // WRITE packets a has sent
	qps   []*mr.QueuePair
	cq    *verbs.CompletionQueue
	wcs   []verbs.WorkCompletion
	src   *verbs.MemoryRegion
	dst   *verbs.MemoryRegion
	out   int // WRITEs outstanding
	id    uint64
	conns []*mr.Conn // the idle connections, to check they stay up
	msg   int        // bytes per WRITE

	scatter   int              // > 0: a's threshold for NextPacketScatter
	sc        mr.Scatter       // the last scattered packet
	scattered int              // packets a sent with their payload by reference
	coalesce  int              // > 1: a's datagrams carry up to this many packets
	coalesced int              // packets a sent as follow-ons in another's datagram
	tap       func(pkt []byte) // if set, sees every packet a sends, as on the wire
}

func newPacketPath(tb testing.TB, sh packetPathShape) *packetPath {
	tb.Helper()
	mk := func(node mr.NodeID, paths int, accept bool) *mr.Endpoint {
		cfg := mr.Config{Paths: paths, MTU: ppMTU, Node: node, Incarnation: mr.Incarnation(node),
			AcceptIncoming: accept, Streams: max(sh.streams, 1),
			KeepaliveInterval: time.Hour, PeerDeadTimeout: 2 * time.Hour}
		if sh.mode != mr.SecurityNone {
			cfg.Security = mr.Security{Mode: sh.mode, Secret: []byte("packet-path benchmark secret")}
			cfg.Rand = verbs.NewSeededRandom(uint64(node))
		}
		e, err := mr.NewEndpoint(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return e
	}
	pp := &packetPath{tb: tb, msg: sh.msgLen(), scatter: sh.scatter, coalesce: sh.coalesce}
	pp.eps = []*mr.Endpoint{mk(1, sh.paths, false), mk(2, sh.paths, true)}
	if sh.conns > 1 {
		pp.eps = append(pp.eps, mk(3, 1, false), mk(4, 1, true))
	}
	a, z := pp.eps[0], pp.eps[1]
	pp.buf = make([]byte, a.MaxPacketLen())
	ca, err := a.Connect(pp.now, 1)
	if err != nil {
		tb.Fatal(err)
	}
	for !ca.Established() {
		pp.round()
	}
	cz, ok := z.Accept()
	if !ok {
		tb.Fatal("no accepted connection")
	}
	for i := 1; i < sh.conns; i++ {
		c1, err := a.Connect(pp.now, 3)
		if err != nil {
			tb.Fatal(err)
		}
		c2, err := pp.eps[2].Connect(pp.now, 1)
		if err != nil {
			tb.Fatal(err)
		}
		pp.conns = append(pp.conns, c1, c2)
	}
	for _, c := range pp.conns {
		for !c.Established() {
			pp.round()
		}
	}
	for _, e := range pp.eps {
		for {
			if _, ok := e.Accept(); !ok {
				break
			}
		}
	}
	if a.Connections() != sh.conns || z.Connections() != sh.conns {
		tb.Fatalf("connections: a %d, z %d, want %d", a.Connections(), z.Connections(), sh.conns)
	}
	// Idle initiators prove themselves to their acceptors after a few
	// microseconds (amplification.go): part of the handshake, not of the
	// packet path, so it happens before anything is measured.
	for end := pp.now + 100_000; pp.now < end; {
		pp.round()
	}
	pa, pz := a.AllocPD(), z.AllocPD()
	pp.cq = verbs.NewCompletionQueue(2 * ppDepth)
	pp.wcs = make([]verbs.WorkCompletion, 64)
	for s := 0; s < sh.streams; s++ {
		q, err := ca.CreateQP(mr.StreamID(s), verbs.QPAttr{PD: pa, SendCQ: pp.cq})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := cz.CreateQP(mr.StreamID(s), verbs.QPAttr{PD: pz}); err != nil {
			tb.Fatal(err)
		}
		pp.qps = append(pp.qps, q)
	}
	pp.src, _ = pa.RegisterMR(make([]byte, pp.msg), 0)
	pp.dst, _ = pz.RegisterMR(make([]byte, 4*pp.msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	return pp
}

// round delivers everything every endpoint has to send, then moves time on
// and runs the timers that fell due.
func (pp *packetPath) round() {
	for i, e := range pp.eps {
		for {
			meta, ok := pp.next(i, e)
			if !ok {
				break
			}
			if i == 0 && meta.Peer == 1 {
				pp.data += writesIn(pp.buf[:meta.Len])
			}
			if i == 0 && pp.tap != nil {
				pp.tap(pp.buf[:meta.Len])
			}
			pp.eps[meta.Peer].Receive(pp.now, pp.buf[:meta.Len], verbs.RxMeta{Peer: verbs.PeerHandle(i)})
		}
	}
	pp.now += 500
	for _, e := range pp.eps {
		if e.NextDeadline() <= pp.now {
			e.OnTimer(pp.now)
		}
	}
}

// next builds endpoint i's next packet into pp.buf. With a scatter
// threshold, a builds by NextPacketScatter and the packet is assembled
// here (headers, payload from its place, trailer), as a driver copying
// segments into its ring would: one payload copy, as in the copying form.
func (pp *packetPath) next(i int, e *mr.Endpoint) (verbs.TxMeta, bool) {
	if i != 0 {
		return e.NextPacket(pp.now, pp.buf)
	}
	if pp.scatter == 0 {
		meta, ok := e.NextPacket(pp.now, pp.buf)
		for k := 1; ok && k < pp.coalesce; k++ {
			more, added := e.NextCoalesced(pp.now, pp.buf, meta.Len)
			if !added {
				break
			}
			pp.coalesced++
			meta = more
		}
		return meta, ok
	}
	meta, ok := e.NextPacketScatter(pp.now, pp.buf, pp.scatter, &pp.sc)
	if ok && pp.sc.Payload != nil {
		n := pp.sc.HdrLen
		n += copy(pp.buf[n:], pp.sc.Payload)
		n += copy(pp.buf[n:], pp.sc.Trailer[:])
		if n != meta.Len {
			pp.tb.Fatalf("scattered packet: %d bytes assembled, meta.Len %d", n, meta.Len)
		}
		pp.scattered++
	}
	return meta, ok
}

// writesIn counts the WRITE packets in datagram d, coalesced or not.
func writesIn(d []byte) int {
	if d[0] != mr.CoalesceMark {
		if d[1] == byte(mr.OpWrite) {
			return 1
		}
		return 0
	}
	n := 0
	for off := 1; off+2 < len(d); {
		l := int(d[off])<<8 | int(d[off+1])
		if d[off+2+1] == byte(mr.OpWrite) {
			n++
		}
		off += 2 + l
	}
	return n
}

// run sends at least packets more WRITE packets, keeping ppDepth WRITEs
// outstanding.
func (pp *packetPath) run(packets int) {
	target := pp.data + packets
	for pp.data < target {
		for pp.out < ppDepth {
			pp.id++
			q := pp.qps[pp.id%uint64(len(pp.qps))]
			off := (pp.id % 4) * uint64(pp.msg)
			if err := q.PostSend(pp.now, verbs.SendWR{ID: pp.id, Opcode: verbs.WRWrite, Local: pp.src.SGE(0, pp.msg),
				RemoteAddr: pp.dst.Addr() + off, RKey: pp.dst.RKey()}); err != nil {
				pp.tb.Fatal(err)
			}
			pp.out++
		}
		pp.round()
		for {
			n := pp.cq.Poll(pp.wcs)
			if n == 0 {
				break
			}
			for _, wc := range pp.wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					pp.tb.Fatal(wc.Status)
				}
			}
			pp.out -= n
		}
	}
}

// check fails unless every connection is still up.
func (pp *packetPath) check() {
	for _, c := range pp.conns {
		if !c.Established() {
			pp.tb.Fatalf("idle connection %d: %s", c.LocalID(), c.State())
		}
	}
}

// BenchmarkPacketPath measures the whole life of one data packet with a
// 4 KiB payload (64 bytes in the payload=64 shapes) between two endpoints
// in one goroutine: the sender builds it (NextPacket), the receiver checks
// and places it (Receive), the receiver's coalesced ACK is built and
// processed, and the slot is retired. One op is one data packet; steady state must not allocate
// (TestPacketPathAllocs asserts it), and ns/op must not grow with paths,
// streams or connections.
func BenchmarkPacketPath(b *testing.B) {
	defer mr.SetAggregateChecks(mr.SetAggregateChecks(false)) // measure the aggregates, not their checks
	for _, sh := range packetPathShapes() {
		// One setup per shape, not per b.N the benchmark tries: 4000
		// connections take a while to open, and the run stays bounded.
		var pp *packetPath
		b.Run(sh.String(), func(b *testing.B) {
			if pp == nil {
				pp = newPacketPath(b, sh)
				pp.run(20000) // warm up: rings and pools reach their working size
			}
			pp.tb = b
			// Collect the setup's garbage now (4000 connections leave a
			// lot): a collection still running when the timer starts
			// would bill its marking, which is not per-packet work, to
			// the shapes with many connections.
			runtime.GC()
			b.SetBytes(int64(sh.payload))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			pp.run(b.N)
			b.StopTimer()
			if cpu > 0 {
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			}
			pp.check()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
		})
	}
}

// TestPacketPathAllocs asserts what BenchmarkPacketPath reports: in steady
// state the packet path allocates nothing, in every shape of the matrix.
func TestPacketPathAllocs(t *testing.T) {
	defer mr.SetAggregateChecks(mr.SetAggregateChecks(false)) // the checks' walks are not the packet path
	for _, sh := range packetPathShapes() {
		t.Run(sh.String(), func(t *testing.T) {
			pp := newPacketPath(t, sh)
			pp.run(4 * ppDepth) // warm up: rings and pools reach their working size
			before := pp.data
			allocs := testing.AllocsPerRun(20, func() { pp.run(64) })
			if pp.data-before < 20*64 {
				t.Fatalf("only %d data packets in the measured runs", pp.data-before)
			}
			if sh.scatter > 0 && pp.scattered < pp.data {
				t.Fatalf("%d of %d data packets scattered, want all", pp.scattered, pp.data)
			}
			if sh.coalesce > 1 && pp.coalesced*2 < pp.data {
				t.Fatalf("%d of %d data packets sent as follow-ons, want half at least", pp.coalesced, pp.data)
			}
			pp.check()
			if allocs != 0 {
				t.Fatalf("%v allocations per 64 data packets, want 0", allocs)
			}
		})
	}
}
