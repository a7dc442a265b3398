package metaroce

import (
	"encoding/binary"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// innerPackets returns the packets of datagram d (one when it is not
// coalesced), or nil when its framing is malformed.
func innerPackets(d []byte) [][]byte {
	if d[0] != CoalesceMark {
		return [][]byte{d}
	}
	if coalescedCount(d) == 0 {
		return nil
	}
	var out [][]byte
	for off := 1; off < len(d); {
		var p []byte
		p, off = innerAt(d, off)
		out = append(out, p)
	}
	return out
}

// TestCoalescedTransfer: small SENDs, WRITEs and READs both ways with
// datagrams of up to 8 packets and every 9th datagram lost. Everything
// completes with its bytes in place, follow-ons really travel (most small
// packets share a datagram), every datagram fits the connection's largest
// packet, a follow-on is only new data on its datagram's path, and no
// datagram carries a due ACK after data.
func TestCoalescedTransfer(t *testing.T) {
	w := newWirePair(t, Config{Paths: 4, MTU: 1024})
	w.coalesce = 8
	a, b := w.ep[0], w.ep[1]
	ca, cb := w.connect(t)

	var dgrams, coalesced, lost int
	w.drop = func(from int, d []byte) bool {
		dgrams++
		require.LessOrEqual(t, len(d), ca.maxPacketLen(), "datagram over the connection's largest packet")
		pkts := innerPackets(d)
		require.NotNil(t, pkts, "malformed framing from endpoint %d", from)
		if len(pkts) > 1 {
			coalesced++
			var h0 Header
			require.NoError(t, h0.Decode(pkts[0]))
			for _, p := range pkts[1:] {
				var h Header
				require.NoError(t, h.Decode(p))
				require.True(t, h.Opcode.CarriesMsg(), "follow-on %s", h.Opcode)
				require.Equal(t, h0.Path, h.Path, "follow-on on another path")
				require.Zero(t, h.Flags&FlagRetransmit, "follow-on resend")
			}
		}
		if dgrams%9 == 0 {
			lost++
			return true
		}
		return false
	}

	pda, pdb := a.AllocPD(), b.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(1024), verbs.NewCompletionQueue(1024)
	qa, err := ca.CreateQP(1, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	qb, err := cb.CreateQP(1, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
	require.NoError(t, err)
	const msgs, size = 48, 64
	srcA, srcB := make([]byte, msgs*size), make([]byte, msgs*size)
	for i := range srcA {
		srcA[i], srcB[i] = byte(i*7+1), byte(i*13+5)
	}
	recvA, recvB := make([]byte, msgs*size), make([]byte, msgs*size)
	wrB := make([]byte, msgs*size) // a WRITEs here
	rdA := make([]byte, msgs*size) // a READs b's srcB here
	mrA, _ := pda.RegisterMR(srcA, 0)
	mrB, _ := pdb.RegisterMR(srcB, verbs.AccessRemoteRead)
	mrRecvA, _ := pda.RegisterMR(recvA, verbs.AccessLocalWrite)
	mrRecvB, _ := pdb.RegisterMR(recvB, verbs.AccessLocalWrite)
	mrWr, _ := pdb.RegisterMR(wrB, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	mrRd, _ := pda.RegisterMR(rdA, verbs.AccessLocalWrite)
	for i := 0; i < msgs; i++ {
		off := i * size
		require.NoError(t, qa.PostRecv(w.now, verbs.RecvWR{ID: uint64(i), Local: mrRecvA.SGE(off, size)}))
		require.NoError(t, qb.PostRecv(w.now, verbs.RecvWR{ID: uint64(i), Local: mrRecvB.SGE(off, size)}))
	}
	for i := 0; i < msgs; i++ {
		off := i * size
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Local: mrA.SGE(off, size)}))
		require.NoError(t, qb.PostSend(w.now, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Local: mrB.SGE(off, size)}))
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: uint64(1000 + i), Opcode: verbs.WRWrite, Local: mrA.SGE(off, size),
			RemoteAddr: mrWr.Addr() + uint64(off), RKey: mrWr.RKey()}))
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: uint64(2000 + i), Opcode: verbs.WRRead, Local: mrRd.SGE(off, size),
			RemoteAddr: mrB.Addr() + uint64(off), RKey: mrB.RKey()}))
	}
	want := 3*msgs + msgs + 2*msgs // a: sends, writes, reads; b: sends; receives at both
	got := 0
	buf := make([]verbs.WorkCompletion, 64)
	w.runUntil(t, func() bool {
		for _, cq := range []*verbs.CompletionQueue{cqa, cqb} {
			n := cq.Poll(buf)
			for _, wc := range buf[:n] {
				require.Equal(t, verbs.StatusSuccess, wc.Status, "%+v", wc)
			}
			got += n
		}
		return got == want
	}, 10e9)
	require.Equal(t, srcA, recvB)
	require.Equal(t, srcB, recvA)
	require.Equal(t, srcA, wrB)
	require.Equal(t, srcB, rdA)
	require.Positive(t, lost)
	require.Greater(t, coalesced, dgrams/10, "%d of %d datagrams coalesced", coalesced, dgrams)
	follow := ca.Counters().TxCoalesced + cb.Counters().TxCoalesced
	require.Positive(t, follow)
	require.Positive(t, a.Counters().RxCoalesced)
	require.Positive(t, b.Counters().RxCoalesced)
	require.Zero(t, a.Counters().Malformed+b.Counters().Malformed)
	t.Logf("%d datagrams, %d coalesced, %d follow-on packets, %d lost", dgrams, coalesced, follow, lost)
}

// TestCoalesceWaitsForBacklog: SENDs posted in groups of k on an idle
// connection. While fewer than coalesceBacklog packets are in flight
// before a datagram, every data datagram goes alone: a group of 4 never
// shares one. A group of 32 does once the first 8 are out, and no
// datagram that starts with data was built with less in flight.
func TestCoalesceWaitsForBacklog(t *testing.T) {
	for _, k := range []int{4, coalesceBacklog, 32} {
		w := newWirePair(t, Config{Paths: 1, MTU: 1024})
		w.coalesce = 8
		a, b := w.ep[0], w.ep[1]
		ca, cb := w.connect(t)
		pda, pdb := a.AllocPD(), b.AllocPD()
		cqa, cqb := verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
		qa, _ := ca.CreateQP(1, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
		qb, _ := cb.CreateQP(1, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
		mra, _ := pda.RegisterMR(make([]byte, 64*k), 0)
		mrb, _ := pdb.RegisterMR(make([]byte, 64*k), verbs.AccessLocalWrite)
		var datagrams, coalesced int
		w.drop = func(from int, d []byte) bool {
			pkts := innerPackets(d)
			var h Header
			require.NoError(t, h.Decode(pkts[0]))
			if from == 0 && h.Opcode.CarriesMsg() {
				datagrams++
				if len(pkts) > 1 {
					coalesced++
				}
			}
			return false
		}
		buf := make([]verbs.WorkCompletion, 64)
		for round := 0; round < 5; round++ {
			for i := 0; i < k; i++ {
				require.NoError(t, qb.PostRecv(w.now, verbs.RecvWR{ID: uint64(i), Local: mrb.SGE(64*i, 64)}))
				require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRSend, Local: mra.SGE(64*i, 64)}))
			}
			got := 0
			w.runUntil(t, func() bool {
				got += cqa.Poll(buf)
				return got == k
			}, w.now+1e9)
			for cqb.Poll(buf) > 0 {
			}
		}
		t.Logf("groups of %d: %d data datagrams, %d coalesced", k, datagrams, coalesced)
		switch {
		case k <= coalesceBacklog:
			require.Zero(t, coalesced, "groups of %d", k)
			require.Equal(t, 5*k, datagrams)
		default:
			require.Positive(t, coalesced, "groups of %d", k)
			require.Less(t, datagrams, 5*k)
		}
	}
}

// TestCoalescedPingPongAckFirst: a responder whose ACK of a request is
// due when its answer is posted sends both in one datagram, the ACK
// first, so the requester sees its send complete before the answer
// arrives (what libverbs/ctest/notify.c requires).
func TestCoalescedPingPongAckFirst(t *testing.T) {
	w := newWirePair(t, Config{Paths: 2, MTU: 1024})
	w.coalesce = 4
	a, b := w.ep[0], w.ep[1]
	ca, cb := w.connect(t)
	pda, pdb := a.AllocPD(), b.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	qa, _ := ca.CreateQP(1, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := cb.CreateQP(1, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
	mem := func(pd *verbs.ProtectionDomain) *verbs.MemoryRegion {
		mr, err := pd.RegisterMR(make([]byte, 128), verbs.AccessLocalWrite)
		require.NoError(t, err)
		return mr
	}
	mra, mrb := mem(pda), mem(pdb)
	var both int
	w.drop = func(from int, d []byte) bool {
		if pkts := innerPackets(d); from == 1 && len(pkts) == 2 {
			var h0, h1 Header
			require.NoError(t, h0.Decode(pkts[0]))
			require.NoError(t, h1.Decode(pkts[1]))
			require.Equal(t, OpAck, h0.Opcode)
			require.Equal(t, OpSend, h1.Opcode)
			both++
		}
		return false
	}
	buf := make([]verbs.WorkCompletion, 4)
	for round := 0; round < 20; round++ {
		require.NoError(t, qa.PostRecv(w.now, verbs.RecvWR{ID: 1, Local: mra.SGE(64, 64)}))
		require.NoError(t, qb.PostRecv(w.now, verbs.RecvWR{ID: 1, Local: mrb.SGE(64, 64)}))
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Local: mra.SGE(0, 64)}))
		// b answers as soon as the request is in, before it sends anything.
		w.runUntil(t, func() bool { return cqb.Poll(buf[:1]) == 1 }, w.now+1e9)
		require.NoError(t, qb.PostSend(w.now, verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Local: mrb.SGE(0, 64)}))
		var order []verbs.WCOpcode
		w.runUntil(t, func() bool {
			n := cqa.Poll(buf)
			for _, wc := range buf[:n] {
				order = append(order, wc.Opcode)
			}
			return len(order) == 2
		}, w.now+1e9)
		require.Equal(t, []verbs.WCOpcode{verbs.WCSend, verbs.WCRecv}, order, "round %d", round)
		w.runUntil(t, func() bool { return cqb.Poll(buf[:1]) == 1 }, w.now+1e9) // b's send completes
	}
	require.Positive(t, both, "no ACK and answer in one datagram")
}

// TestCoalescedFramingHostile: malformed framing is dropped whole and
// counted; well-formed framing around garbage hands each inner packet to
// the packet checks, which drop them one by one.
func TestCoalescedFramingHostile(t *testing.T) {
	junk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + 7)
		}
		b[0], b[1], b[2], b[3] = WireVersion, byte(OpSend), 0, 0 // unsealed: its CRC decides
		return b
	}
	frame := func(parts ...[]byte) []byte {
		d := []byte{CoalesceMark}
		for _, p := range parts {
			d = binary.BigEndian.AppendUint16(d, uint16(len(p)))
			d = append(d, p...)
		}
		return d
	}
	nested := frame(junk(40), junk(40))
	cases := map[string][]byte{
		"mark only":        {CoalesceMark},
		"one packet":       frame(junk(40)),
		"short inner":      frame(junk(40), junk(minInnerLen-1)),
		"length past end":  frame(junk(40), junk(40))[:82],
		"half a length":    append(frame(junk(40), junk(40)), 0),
		"zero length":      frame(junk(40), nil, junk(40)),
		"nested":           frame(junk(40), nested),
		"over the maximum": frame(junk(40), junk(2000), junk(2000)),
	}
	for name, d := range cases {
		e, err := NewEndpoint(Config{Paths: 2, MTU: 1024})
		require.NoError(t, err)
		e.Receive(0, d, verbs.RxMeta{})
		c := e.Counters()
		require.Equal(t, uint64(1), c.Malformed, name)
		require.Equal(t, uint64(1), c.RxPackets, name)
		require.Zero(t, c.RxCoalesced+c.CRCDrops, name)
		if name != "over the maximum" {
			require.Equal(t, 1, e.DatagramPackets(d), name) // its framing is bad: one datagram, dropped
		}
	}
	e, _ := NewEndpoint(Config{Paths: 2, MTU: 1024})
	require.Equal(t, 1, e.DatagramPackets(junk(40)))
	require.Equal(t, 1, e.DatagramPackets(nil))
	require.Equal(t, 3, e.DatagramPackets(frame(junk(40), junk(60), junk(80))))
	e.Receive(0, frame(junk(40), junk(60), junk(80)), verbs.RxMeta{})
	c := e.Counters()
	require.Equal(t, uint64(1), c.RxCoalesced)
	require.Equal(t, uint64(3), c.RxPackets)
	require.Equal(t, uint64(3), c.CRCDrops)
}

// FuzzCoalescedFraming: any datagram starting with the mark either splits
// into inner packets that tile it exactly (each at least a header and a
// CRC long, none itself coalesced, two or more) or is refused whole; and
// Receive of it never panics and counts it once as malformed or once as
// coalesced.
func FuzzCoalescedFraming(f *testing.F) {
	p := make([]byte, 40)
	p[0] = WireVersion
	two := []byte{CoalesceMark, 0, 40}
	two = append(append(two, p...), 0, 40)
	two = append(two, p...)
	f.Add(two)
	f.Add([]byte{CoalesceMark})
	f.Add([]byte{CoalesceMark, 0, 40})
	f.Add(append([]byte{CoalesceMark, 0, 43}, two...))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := append([]byte{CoalesceMark}, body...)
		n := coalescedCount(d)
		if n > 0 {
			total := 1
			for _, q := range innerPackets(d) {
				require.GreaterOrEqual(t, len(q), minInnerLen)
				require.NotEqual(t, byte(CoalesceMark), q[0])
				total += CoalesceLenLen + len(q)
			}
			require.Equal(t, len(d), total)
			require.GreaterOrEqual(t, n, 2)
		}
		e, err := NewEndpoint(Config{Paths: 2, MTU: 1024})
		require.NoError(t, err)
		require.Equal(t, max(1, n), e.DatagramPackets(d))
		e.Receive(0, d, verbs.RxMeta{})
		c := e.Counters()
		if n == 0 || len(d) > e.MaxPacketLen() {
			require.Zero(t, c.RxCoalesced)
			require.Equal(t, uint64(1), c.Malformed)
		} else {
			require.Equal(t, uint64(1), c.RxCoalesced)
			require.Equal(t, uint64(n), c.RxPackets)
		}
	})
}
