package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The forgeries the issue made with the incarnation (a newer-generation
// NOP per path, a forged ACK, a stream of rate_hint=1 ACKs, a forged NAK,
// and a KEEPALIVE keeping a dead peer alive), sent from the peer's own
// address into a live transfer by an attacker who knows everything but
// the connection's tokens: both node ids, incarnations and connection
// ids, every path's generation and the addresses. Each is refused and
// counted, the transfer completes with every byte right, and the same
// packet with the proof (what the peer has) is honoured, so the refusal
// is the proof's doing.
//
// What each forgery must guess (docs/security.md, mode none):
//   - ACK, NAK, KEEPALIVE, CLOSE, RESET: the 64-bit tag (token.go), 2^-64
//     per try, on top of the two 32-bit connection ids (2^-128 for an
//     attacker who does not know them).
//   - a newer-generation NOP (or any sequenced packet): a PSN within 257
//     of a generation's first PSN, which the tokens key (2^-24 per try),
//     and the generation's 64-bit proof (genproof.go): 2^-88 per try, and
//     2^-64 even for one who knows the PSNs too (genproof_test.go); and a
//     proven one moves the path at most maxGenStep generations
//     (generation.go), which the sender's own restarts catch up with.

type forgeFixture struct {
	w        *wirePair
	ca, cb   *Conn
	qa       *QueuePair
	src, dst []byte
	md       *verbs.MemoryRegion // the destination, whose rkey and address the attacker knows
	cq       *verbs.CompletionQueue
}

func newForgeFixture(t *testing.T, n int) *forgeFixture {
	f, ms := newForgeRegions(t, Config{Paths: 4, MTU: 1024}, n)
	require.NoError(t, f.qa.PostSend(f.w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, n), RemoteAddr: f.md.Addr(), RKey: f.md.RKey()}))
	// Into the transfer: something placed, much still to go.
	f.w.runUntil(t, func() bool { return f.cb.c.PayloadPlaced > uint64(n/8) }, f.w.now+1e9)
	return f
}

// newForgeRegions connects a wire pair made with cfg and gives A a QP and
// an n-byte source region (returned, with a pattern in it), B a QP and an
// n-byte destination (f.md); nothing is posted.
func newForgeRegions(t *testing.T, cfg Config, n int) (*forgeFixture, *verbs.MemoryRegion) {
	w := newWirePair(t, cfg)
	f := &forgeFixture{w: w}
	f.ca, f.cb = w.connect(t)
	pa, pb := w.ep[0].AllocPD(), w.ep[1].AllocPD()
	f.cq = verbs.NewCompletionQueue(8)
	var err error
	f.qa, err = f.ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: f.cq, RecvCQ: f.cq})
	require.NoError(t, err)
	_, err = f.cb.CreateQP(0, verbs.QPAttr{PD: pb})
	require.NoError(t, err)
	f.src, f.dst = make([]byte, n), make([]byte, n)
	for i := range f.src {
		f.src[i] = byte(i*7 + i>>10)
	}
	ms, err := pa.RegisterMR(f.src, 0)
	require.NoError(t, err)
	md, err := pb.RegisterMR(f.dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	f.md = md
	return f, ms
}

// finish runs the transfer to its end and checks every byte.
func (f *forgeFixture) finish(t *testing.T) time.Duration {
	start := f.w.now
	var wc [1]verbs.WorkCompletion
	f.w.runUntil(t, func() bool { return f.cq.Poll(wc[:]) == 1 }, f.w.now+10e9)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)
	require.Equal(t, f.src, f.dst)
	return time.Duration(f.w.now - start)
}

// forged builds a packet from the peer of to (ids, incarnation as the
// peer's), optionally with the proof the peer would add.
func forged(to *Conn, op Opcode, path verbs.PathID, gen uint16, psn PSN, ext []byte, prove bool) []byte {
	h := Header{Opcode: op, DstConn: to.local, SrcConn: to.remote, Incarnation: to.peerInc, Path: path, PathGen: gen, PSN: psn}
	if op.Sequenced() {
		h.Flags = FlagAckReq
	}
	b := make([]byte, HeaderLen+len(ext)+CRCLen)
	h.Put(b)
	copy(b[HeaderLen:], ext)
	if prove {
		putTag(b, HeaderLen+len(ext), &to.tokLocal)
	}
	return b[:SealCRC(b, HeaderLen+len(ext))]
}

// inject delivers pkt to the end of conn to, from its peer's address.
func (f *forgeFixture) inject(to *Conn, pkt []byte) {
	i := 0
	if to == f.cb {
		i = 1
	}
	f.w.ep[i].Receive(f.w.now, pkt, verbs.RxMeta{Peer: verbs.PeerHandle(1 - i)})
}

// A NOP per path and generation step (1..maxGenStep+2) at guessed PSNs,
// 1,000 per path: none is adopted, the path goes on in its generation.
// The controls: a NOP at the next generation's first PSN, which only a
// holder of the tokens can compute, is refused still without the
// generation's proof (genproof.go), and adopted with it.
func TestForgedNewerGenerationNop(t *testing.T) {
	f := newForgeFixture(t, 1<<20)
	guess := verbs.NewSeededRandom(151)
	const perPath = 1000
	refused := uint64(0)
	for p := range f.cb.rx {
		for i := 0; i < perPath; i++ {
			r := &f.cb.rx[p]
			step := uint16(1 + i%(maxGenStep+2))
			f.inject(f.cb, forged(f.cb, OpNop, verbs.PathID(p), r.gen+step, PSN(guess.Uint64()), nil, false))
			require.Zero(t, r.gen, "path %d adopted a forged generation", p)
		}
		refused += f.cb.tx[p].c.GenerationsRefused
	}
	require.Equal(t, uint64(perPath*len(f.cb.rx)), refused, "every forged NOP was refused and counted")
	t.Logf("%d forged newer-generation NOPs refused; in %v the transfer finished", refused, f.finish(t))

	// The controls.
	r := &f.cb.rx[1]
	f.inject(f.cb, forged(f.cb, OpNop, 1, r.gen+1, initialPSN(r.isn, r.gen+1), nil, false))
	require.Zero(t, r.gen, "a NOP at the next generation's first PSN was adopted without its proof")
	f.inject(f.cb, forgedGen(f.cb, OpNop, 1, r.gen+1, initialPSN(r.isn, r.gen+1), nil, genProofOf))
	require.Equal(t, uint16(1), r.gen, "a proven NOP at the next generation's first PSN was not adopted")
}

// ACKs acknowledging every outstanding PSN of every path, with rate hint 1
// (11.6 KB/s), 200 of them, and a NAK of an outstanding packet with
// REMOTE_ACCESS_ERROR, sent to the data sender: refused (BadTags), no hint
// taken, nothing retired, no message failed. The controls: the same ACK
// and NAK with the proof are acted on.
func TestForgedAckAndNak(t *testing.T) {
	f := newForgeFixture(t, 1<<20)
	ca := f.ca
	ack := func(hint uint32, prove bool) []byte {
		ext := make([]byte, AckPrefixLen+len(ca.tx)*AckBlockLen)
		n := AckPrefixLen
		for i := range ca.tx {
			p := &ca.tx[i]
			b := AckBlock{Path: verbs.PathID(i), PathGen: p.gen, Cum: p.next, RateHint: hint, TSEcho: p.lastStamp}
			n += b.Put(ext[n:])
		}
		PutAckPrefix(ext, len(ca.tx))
		return forged(ca, OpAck, 0, 0, 0, ext[:n], prove)
	}
	hint, blocks := ca.limit.hintBps, ca.c.AckBlocksReceived
	for i := 0; i < 200; i++ {
		f.inject(ca, ack(1, false))
	}
	require.Equal(t, uint64(200), ca.c.BadTags)
	require.Equal(t, hint, ca.limit.hintBps, "a forged ACK's rate hint was taken")
	require.Equal(t, blocks, ca.c.AckBlocksReceived, "a forged ACK's blocks were read")

	// A NAK of an outstanding data packet.
	var nak []byte
	var nakSeq MsgSeq
	for i := range ca.tx {
		p := &ca.tx[i]
		for psn := p.una; psn.Less(p.next) && nak == nil; psn++ {
			if s := p.slot(psn); s.kind == slotData && s.sent && !s.nop {
				ext := make([]byte, NakLen)
				nakSeq = s.msg.seq
				(&NakBody{Path: p.id, PathGen: p.gen, PSN: psn, Stream: 0, Status: verbs.StatusRemoteAccessError, MsgSeq: nakSeq}).Put(ext)
				nak = ext
			}
		}
		if nak != nil {
			f.inject(ca, forged(ca, OpNak, p.id, 0, 0, nak, false))
			break
		}
	}
	require.NotNil(t, nak, "no outstanding data packet to NAK")
	require.Equal(t, uint64(201), ca.c.BadTags)
	require.Zero(t, ca.c.NaksReceived)
	t.Logf("200 forged rate_hint=1 ACKs and a forged NAK refused; in %v the transfer finished", f.finish(t))

	// The controls, after the transfer: an ACK with the proof is read (its
	// hint taken); a NAK with the proof is counted.
	f.inject(ca, ack(1, true))
	require.Equal(t, 1e6, ca.limit.hintBps)
	f.inject(ca, forged(ca, OpNak, 0, 0, 0, nak, true))
	require.Equal(t, uint64(1), ca.c.NaksReceived)
}

// A peer that has gone silent is found dead at PeerDeadTimeout although a
// forger sends KEEPALIVEs (and CLOSEs, RESETs) in its name every
// millisecond: none refreshes liveness or ends anything. The control: a
// KEEPALIVE with the proof is answered.
func TestForgedKeepaliveDoesNotKeepAlive(t *testing.T) {
	w := newWirePair(t, Config{Paths: 2, PeerDeadTimeout: 50 * time.Millisecond, KeepaliveInterval: 5 * time.Millisecond})
	ca, cb := w.connect(t)
	f := &forgeFixture{w: w, ca: ca, cb: cb}
	w.runUntil(t, func() bool { return !cb.halfOpen.in }, w.now+1e9)
	f.inject(cb, forged(cb, OpKeepalive, 0, 0, 0, nil, true))
	require.Equal(t, 1, cb.ctrl.Len(), "a proven KEEPALIVE is answered")
	w.drop = func(from int, _ []byte) bool { return from == 0 } // A falls silent
	start := w.now
	sent := 0
	for i := 0; cb.state == connEstablished; i++ {
		op := []Opcode{OpKeepalive, OpClose, OpReset, OpCloseAck}[i%4]
		f.inject(cb, forged(cb, op, 0, 0, 0, nil, false))
		sent++
		end := w.now + verbs.Time(time.Millisecond)
		for w.now < end && w.step() {
		}
		require.Less(t, w.now-start, verbs.Time(time.Second), "still alive after 1 s")
	}
	require.Equal(t, verbs.FailPeerDead, cb.reason)
	require.GreaterOrEqual(t, time.Duration(w.now-start), 50*time.Millisecond)
	require.Equal(t, uint64(sent), cb.c.BadTags, "every forgery refused and counted")
	require.GreaterOrEqual(t, sent, 8)
	t.Logf("%d forged KEEPALIVE/CLOSE/RESET/CLOSE_ACK refused; peer found dead after %v", sent, time.Duration(w.now-start))
}
