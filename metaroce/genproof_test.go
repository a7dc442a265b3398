package metaroce

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// A generation's proof (genproof.go) against an attacker who knows
// everything but the connection's tokens: both connection ids, the
// incarnation, every path's generation, and even the window of the next
// generations' first PSNs (which the tokens key, so it is given away here
// to measure the proof alone), the destination's rkey and address.

// forgedGen builds a sequenced packet of the peer of to at gen and psn,
// with FlagGenProof and the proof proof(header) in its timestamp field.
func forgedGen(to *Conn, op Opcode, path verbs.PathID, gen uint16, psn PSN, ext []byte, proof func(hdr []byte, to *Conn) uint64) []byte {
	h := Header{Opcode: op, Flags: FlagAckReq | FlagGenProof, DstConn: to.local, SrcConn: to.remote, Incarnation: to.peerInc,
		Path: path, PathGen: gen, PSN: psn}
	b := make([]byte, HeaderLen+len(ext)+CRCLen)
	h.Put(b)
	binary.BigEndian.PutUint64(b[tagOff:], proof(b, to))
	copy(b[HeaderLen:], ext)
	return b[:SealCRC(b, HeaderLen+len(ext))]
}

// genProofOf is the proof the real peer of to would write.
func genProofOf(hdr []byte, to *Conn) uint64 { return genProofTag(hdr, &to.tokLocal) }

// guessed returns proofs drawn from r: the attacker's guesses.
func guessed(r verbs.Random) func([]byte, *Conn) uint64 {
	return func([]byte, *Conn) uint64 { return r.Uint64() }
}

// writeExt is the extension and payload of a forged WRITE of n bytes of
// 0xEE at the start of the fixture's destination.
func (f *forgeFixture) writeExt(n int) []byte {
	el := MsgExtLen(OpWrite, 0)
	ext := make([]byte, el+n)
	mh := MsgHeader{PayloadLen: uint16(n), MsgLen: uint32(len(f.dst)), RKey: f.md.RKey(), RemoteAddr: f.md.Addr()}
	mh.Put(OpWrite, 0, ext)
	for i := el; i < len(ext); i++ {
		ext[i] = 0xEE
	}
	return ext
}

// TestForgedGenerationNeedsProof: 100,000 newer-generation packets (NOPs
// and WRITEs into the destination) over the 4 paths of a live 1 MiB
// transfer, each at a PSN in the first window of a generation 1..8 ahead
// (what the cheap checks of generation.go let through) with FlagGenProof
// and a guessed proof: none is adopted, nothing is placed, every one is
// counted (GenerationsRefused, BadTags), and the transfer completes with
// every byte right. The same packets without the flag are refused too
// (without a BadTag: there was no proof to fail). The control: one such
// packet with the real proof is adopted, so the refusals are the proof's
// doing. 0 successes in 100,000 bounds the per-try success probability
// by 3·10^-5 (95%); TestGenProofEveryBitCounts and TestGenProofGuessRate
// show it is 2^-64.
func TestForgedGenerationNeedsProof(t *testing.T) {
	f := newForgeFixture(t, 1<<20)
	cb := f.cb
	guess := verbs.NewSeededRandom(152)
	const tries = 100000
	nop, write := 0, 0
	for i := 0; i < tries; i++ {
		path := verbs.PathID(i % len(cb.rx))
		r := &cb.rx[path]
		gen := r.gen + 1 + uint16(guess.Uint64()%maxGenStep)
		psn := initialPSN(r.isn, gen) + PSN(guess.Uint64()%(SackBits+1))
		var pkt []byte
		if i%2 == 0 {
			pkt = forgedGen(cb, OpNop, path, gen, psn, nil, guessed(guess))
			nop++
		} else {
			pkt = forgedGen(cb, OpWrite, path, gen, psn, f.writeExt(512), guessed(guess))
			write++
		}
		f.inject(cb, pkt)
	}
	refused := uint64(0)
	for p := range cb.rx {
		require.Zero(t, cb.rx[p].gen, "path %d adopted a forged generation", p)
		refused += cb.tx[p].c.GenerationsRefused
	}
	require.Equal(t, uint64(tries), refused, "every forged packet was refused and counted")
	require.Equal(t, uint64(tries), cb.c.BadTags, "every failed proof was counted")
	placed := cb.c.PayloadPlaced
	require.NotContains(t, string(f.dst[:512]), "\xee\xee\xee\xee", "a forged WRITE was placed")

	// Without the flag, at the same PSNs: refused, no proof to count.
	for i := 0; i < 1000; i++ {
		path := verbs.PathID(i % len(cb.rx))
		r := &cb.rx[path]
		f.inject(cb, forged(cb, OpNop, path, r.gen+1, initialPSN(r.isn, r.gen+1)+PSN(i%SackBits), nil, false))
	}
	refused = 0
	for p := range cb.rx {
		require.Zero(t, cb.rx[p].gen)
		refused += cb.tx[p].c.GenerationsRefused
	}
	require.Equal(t, uint64(tries+1000), refused)
	require.Equal(t, uint64(tries), cb.c.BadTags)
	require.Equal(t, placed, cb.c.PayloadPlaced)
	took := f.finish(t)
	t.Logf("%d NOPs and %d WRITEs of newer generations with guessed proofs, 1000 without: 0 adopted "+
		"(per-try success < %.1e at 95%%); the transfer finished in %v", nop, write, 3.0/tries, took)

	// The control: the real proof, on a path the transfer is done with.
	r := &cb.rx[2]
	f.inject(cb, forgedGen(cb, OpNop, 2, r.gen+3, initialPSN(r.isn, r.gen+3)+5, nil, genProofOf))
	require.Equal(t, uint16(3), r.gen, "a proven newer generation was not adopted")
	require.Equal(t, uint64(tries), cb.c.BadTags)
}

// TestGenProofEveryBitCounts: the real proof with any one of its 64 bits
// wrong is refused, and counted, on a live connection; the right one is
// then adopted. With every bit checked, and SipHash's output unknowable
// without the key, a guess succeeds with probability 2^-64.
func TestGenProofEveryBitCounts(t *testing.T) {
	f := newForgeFixture(t, 1<<18)
	cb := f.cb
	r := &cb.rx[1]
	psn := initialPSN(r.isn, 1) + 7
	for bit := 0; bit < 64; bit++ {
		f.inject(cb, forgedGen(cb, OpNop, 1, 1, psn, nil, func(hdr []byte, to *Conn) uint64 {
			return genProofOf(hdr, to) ^ 1<<bit
		}))
		require.Zero(t, r.gen, "a proof wrong in bit %d was taken", bit)
	}
	require.Equal(t, uint64(64), cb.c.BadTags)
	require.Equal(t, uint64(64), cb.tx[1].c.GenerationsRefused)
	// A proof under another token (another connection's, the attacker's
	// own): refused.
	other := Token{1, 2, 3}
	f.inject(cb, forgedGen(cb, OpNop, 1, 1, psn, nil, func(hdr []byte, _ *Conn) uint64 { return genProofTag(hdr, &other) }))
	require.Zero(t, r.gen)
	require.Equal(t, uint64(65), cb.c.BadTags)
	f.inject(cb, forgedGen(cb, OpNop, 1, 1, psn, nil, genProofOf))
	require.Equal(t, uint16(1), r.gen, "the right proof was refused")
	f.finish(t)
}

// TestGenProofCoversHeader: the proof is of every header byte but the
// field it lives in (version, opcode, flags, both ids, incarnation, path,
// generation, PSN): one flipped bit anywhere in them changes it, by about
// half its bits, so a proof seen for one packet (by an on-path observer,
// who has the tokens anyway in mode none) says nothing of another's.
func TestGenProofCoversHeader(t *testing.T) {
	tok := Token{9, 8, 7, 6, 5, 4, 3, 2, 1}
	h := Header{Opcode: OpWrite, Flags: FlagGenProof, DstConn: 0x1234, SrcConn: 0x5678, Incarnation: 99, Path: 3, PathGen: 2, PSN: 0xabcdef}
	b := make([]byte, HeaderLen)
	h.Put(b)
	want := genProofTag(b, &tok)
	changed := 0
	for bit := 0; bit < tagOff*8; bit++ {
		c := bytes.Clone(b)
		c[bit/8] ^= 1 << (bit % 8)
		d := bits.OnesCount64(genProofTag(c, &tok) ^ want)
		require.NotZero(t, d, "bit %d of the header is not covered", bit)
		changed += d
	}
	mean := float64(changed) / (tagOff * 8)
	require.InDelta(t, 32, mean, 3, "a flipped header bit changes %.1f of the proof's 64 bits on average", mean)
	// The field itself is not covered (it is where the proof goes).
	c := bytes.Clone(b)
	binary.BigEndian.PutUint64(c[tagOff:], ^uint64(0))
	require.Equal(t, want, genProofTag(c, &tok))
}

// TestGenProofGuessRate measures what a guess is worth: an attacker told
// all but the low k bits of the right proof (k = 8, 12) succeeds with
// frequency 2^-k, within binomial bounds, over 2^(k+8) tries; the
// receiver compares all 64 bits (TestGenProofEveryBitCounts), so one told
// nothing succeeds with 2^-64.
func TestGenProofGuessRate(t *testing.T) {
	f := newForgeFixture(t, 1<<16)
	cb := f.cb
	guess := verbs.NewSeededRandom(153)
	r := &cb.rx[0]
	h := Header{Opcode: OpNop, Flags: FlagAckReq | FlagGenProof, DstConn: cb.local, SrcConn: cb.remote, Incarnation: cb.peerInc,
		Path: 0, PathGen: r.gen + 1, PSN: initialPSN(r.isn, r.gen+1)}
	raw := make([]byte, HeaderLen)
	h.Put(raw)
	right := genProofTag(raw, &cb.tokLocal)
	for _, k := range []uint{8, 12} {
		tries := 1 << (k + 8)
		hits := 0
		mask := uint64(1)<<k - 1
		for i := 0; i < tries; i++ {
			h.Timestamp = verbs.Time(right&^mask | guess.Uint64()&mask)
			if cb.genProofOK(&h, raw) {
				hits++
			}
		}
		// Binomial(tries, 2^-k): mean 256, sd about 16; 6 sd either way.
		mean := float64(tries) / float64(uint64(1)<<k)
		sd := math.Sqrt(mean)
		require.InDelta(t, mean, float64(hits), 6*sd, "k=%d: %d successes in %d tries", k, hits, tries)
		t.Logf("k=%d unknown bits: %d successes in %d tries, %.2e per try (2^-%d = %.2e)", k, hits, tries,
			float64(hits)/float64(tries), k, 1/float64(uint64(1)<<k))
	}
	require.Zero(t, r.gen, "genProofOK adopts nothing by itself")
}

// TestGenProofCurrentGeneration: a packet of the receiver's current
// generation with FlagGenProof (the sender has not seen an ACK of the
// generation yet) is taken as usual, only its field is not a stamp: no
// echo of it, no one-way delay. Generation 0 needs no proof (the live
// transfers of these tests send none, TestGenProofLivePathFailure).
func TestGenProofCurrentGeneration(t *testing.T) {
	f := newForgeFixture(t, 1<<18)
	f.finish(t)
	cb := f.cb
	r := &cb.rx[3]
	f.inject(cb, forgedGen(cb, OpNop, 3, 1, initialPSN(r.isn, 1), nil, genProofOf))
	require.Equal(t, uint16(1), r.gen)
	require.Zero(t, r.tsEcho, "a proof was taken for a stamp")
	rx := cb.tx[3].c.RxPackets
	// Current generation, a proof that is garbage: taken, never echoed.
	garbage := func([]byte, *Conn) uint64 { return 1 << 62 }
	f.inject(cb, forgedGen(cb, OpNop, 3, 1, initialPSN(r.isn, 1)+1, nil, garbage))
	require.Equal(t, rx+1, cb.tx[3].c.RxPackets, "a current-generation packet with FlagGenProof was not taken")
	require.Zero(t, r.tsEcho, "a proof was taken for a stamp")
	require.Equal(t, uint16(1), r.gen)
	require.Zero(t, cb.c.BadTags, "a current generation's proof is not checked, nor counted")
}

// TestGenProofFlagRefusedOnUnsequenced: on a packet whose timestamp field
// is its tag, FlagGenProof means nothing: refused (Malformed), even with
// a good tag.
func TestGenProofFlagRefusedOnUnsequenced(t *testing.T) {
	w := newWirePair(t, Config{Paths: 2})
	_, cb := w.connect(t)
	f := &forgeFixture{w: w, cb: cb}
	w.runUntil(t, func() bool { return !cb.halfOpen.in }, w.now+1e9)
	ka := forged(cb, OpKeepalive, 0, 0, 0, nil, false)
	binary.BigEndian.PutUint16(ka[2:], uint16(FlagGenProof))
	putTag(ka, HeaderLen, &cb.tokLocal)
	ka = ka[:SealCRC(ka, HeaderLen)]
	bad := w.ep[1].c.Malformed
	f.inject(cb, ka)
	require.Equal(t, bad+1, w.ep[1].c.Malformed)
	require.Zero(t, cb.ctrl.Len(), "a KEEPALIVE with FlagGenProof was answered")
	// The control: the same KEEPALIVE without the flag is answered.
	f.inject(cb, forged(cb, OpKeepalive, 0, 0, 0, nil, true))
	require.Equal(t, 1, cb.ctrl.Len())
}

// TestGenProofLivePathFailure: the protocol's own generation changes
// still work. During a live 2 MiB WRITE over 4 paths, A fails path 2 (as
// its health checks do) and loses what it sends there for 2 ms: A moves
// the path's packets, re-probes it under a new generation, and once the
// path carries again B adopts A's generation and the path is restored;
// the transfer completes with every byte right, and a second one uses the
// restored path. On the wire, in
// mode none: no packet of generation 0 carries FlagGenProof, every
// sequenced packet of a generation B has named in no ACK yet does (with
// the right proof: B refuses none), and A stamps again once an ACK names
// it. In the sealed modes no packet carries the flag, and B adopts all
// the same (the AEAD proves the header).
func TestGenProofLivePathFailure(t *testing.T) {
	for _, mode := range []SecurityMode{SecurityNone, SecurityAuth, SecurityEncrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := Config{Paths: 4, MTU: 1024}
			if mode != SecurityNone {
				cfg.Security = Security{Mode: mode, Secret: []byte("0123456789abcdef0123456789abcdef")}
				cfg.Rand = verbs.NewSeededRandom(154)
			}
			const n = 2 << 20
			f, ms := newForgeRegions(t, cfg, n)
			w, ca, cb, qa, md := f.w, f.ca, f.cb, f.qa, f.md

			const dead = 2
			var lossUntil verbs.Time
			named := map[uint16]uint16{} // per path, the newest generation B's ACKs named
			proofs, proofsCurrent, stamped := 0, 0, 0
			w.drop = func(from int, pkt []byte) bool {
				var h Header
				require.NoError(t, h.decode(pkt, flagsKnown|flagsSeal))
				if from == 1 {
					if h.Opcode == OpAck && mode == SecurityNone {
						body := pkt[HeaderLen : len(pkt)-CRCLen]
						cnt, err := DecodeAckPrefix(body)
						require.NoError(t, err)
						o := AckPrefixLen
						for i := 0; i < cnt; i++ {
							var b AckBlock
							l, err := b.Decode(body[o:])
							require.NoError(t, err)
							o += l
							if int16(b.PathGen-named[uint16(b.Path)]) > 0 {
								named[uint16(b.Path)] = b.PathGen
							}
						}
					}
					return false
				}
				if h.Opcode.Sequenced() {
					proven := h.Flags&FlagGenProof != 0
					switch {
					case mode != SecurityNone:
						require.False(t, proven, "a sealed packet carries FlagGenProof")
					case h.PathGen == 0:
						require.False(t, proven, "a packet of generation 0 carries FlagGenProof")
					case h.PathGen != named[uint16(h.Path)]:
						require.True(t, proven, "a packet of generation %d, which B has not named, has no proof", h.PathGen)
					}
					if proven {
						proofs++
						if h.PathGen == named[uint16(h.Path)] {
							proofsCurrent++ // A has not seen that ACK yet
						}
					} else if h.PathGen > 0 {
						stamped++
					}
				}
				return h.Path == dead && w.now < lossUntil && h.Opcode.Sequenced()
			}
			post := func(id uint64) {
				require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: id, Opcode: verbs.WRWrite, Local: ms.SGE(0, n), RemoteAddr: md.Addr(), RKey: md.RKey()}))
			}
			post(1)
			w.runUntil(t, func() bool { return cb.c.PayloadPlaced > n/16 }, w.now+1e9)
			// The path dies: A finds it failed (as its health checks
			// would), and its probes are lost for 2 ms.
			p := &ca.tx[dead]
			lossUntil = w.now + 2e6
			ca.failPath(w.now, p)
			f.finish(t)
			w.runUntil(t, func() bool { return p.c.Restores > 0 && !p.unproven }, w.now+1e9)
			require.Greater(t, w.now, lossUntil)
			// The restored path carries a second transfer, stamped.
			clear(f.dst)
			before, carried := stamped, cb.tx[dead].c.RxPackets
			post(2)
			f.finish(t)
			if mode == SecurityNone {
				require.Greater(t, stamped, before, "A never stamped again in the new generation")
			}
			require.Greater(t, cb.tx[dead].c.RxPackets, carried, "the restored path carried nothing")

			require.NotZero(t, ca.c.PathFailures, "the dead path was never failed")
			require.NotZero(t, p.c.Restores, "the dead path never came back")
			require.NotZero(t, p.gen, "the dead path never restarted")
			require.Equal(t, p.gen, cb.rx[dead].gen, "B did not follow A's generation")
			require.False(t, p.unproven, "A still proves a generation B has acknowledged")
			require.Zero(t, cb.c.BadTags)
			for i := range cb.rx {
				require.Zero(t, ca.tx[i].c.GenerationsRefused, "B refused a generation of A's own on path %d", i)
			}
			if mode == SecurityNone {
				require.NotZero(t, proofs, "no packet proved its generation")
			} else {
				require.Zero(t, proofs)
			}
			t.Logf("%v: path %d in generation %d after %d failures, %d restores; %d proven packets (%d of an adopted generation), %d stamped of generations > 0",
				mode, dead, p.gen, ca.c.PathFailures, p.c.Restores, proofs, proofsCurrent, stamped)
		})
	}
}

// TestGenProofRefusedSealed: in the sealed modes FlagGenProof is refused
// before the seal is tried (Malformed), on a packet A really sealed.
func TestGenProofRefusedSealed(t *testing.T) {
	for _, mode := range []SecurityMode{SecurityAuth, SecurityEncrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			e := fzNewEnvCfg(t, Config{Paths: 2, MTU: 256, Streams: 4,
				Security: Security{Mode: mode, Secret: []byte("0123456789abcdef0123456789abcdef")}, Rand: verbs.NewSeededRandom(155)})
			b := e.w.ep[1]
			p := make([]byte, b.MaxPacketLen())
			r := &e.cb.rx[0]
			h := Header{Opcode: OpNop, Flags: FlagGenProof, DstConn: e.cb.local, SrcConn: e.ca.local, Incarnation: e.ca.ep.cfg.Incarnation,
				PathGen: r.gen + 1, PSN: initialPSN(r.isn, r.gen+1)}
			h.Put(p)
			n := e.ca.seal(e.w.now, p, HeaderLen)
			bad, auth := b.c.Malformed, e.cb.c.AuthFailures
			b.Receive(e.w.now, p[:n], verbs.RxMeta{Peer: 0})
			require.Equal(t, bad+1, b.c.Malformed)
			require.Equal(t, auth, e.cb.c.AuthFailures, "the seal was tried")
			require.Equal(t, r.gen, e.cb.rx[0].gen)
			// The control: the same packet without the flag is adopted.
			h.Flags = 0
			h.Put(p)
			n = e.ca.seal(e.w.now, p, HeaderLen)
			b.Receive(e.w.now, p[:n], verbs.RxMeta{Peer: 0})
			require.Equal(t, uint16(1), e.cb.rx[0].gen)
		})
	}
}

// TestGenProofRoundLossDetection: in the round that proves a generation
// the peer echoes no stamp (ts_echo 0), yet a gap is still found: the
// latest transmission an ACK block retires stands in for the echo, so a
// probe sent before an acknowledged one and not acknowledged itself is
// resent at once, as with stamps; no RTT sample is taken from it.
func TestGenProofRoundLossDetection(t *testing.T) {
	c := testConn(t, 4)
	p := &c.tx[1]
	now := verbs.Time(1e6)
	c.failPath(now, p)
	require.True(t, p.unproven, "a restarted path does not prove its generation")
	first := p.una
	buf := make([]byte, c.ep.MaxPacketLen())
	for i := 0; i < 2; i++ {
		now += 1000
		c.sendNop(now, p, true)
		_, ok := c.produce(now, buf)
		require.True(t, ok, "probe %d not sent", i)
		var h Header
		require.NoError(t, h.Decode(buf))
		require.NotZero(t, h.Flags&FlagGenProof, "probe %d of an unproven generation without the proof", i)
		require.Equal(t, genProofTag(buf, &c.tokRemote), uint64(h.Timestamp))
	}
	srtt, gaps := p.srtt, p.c.SackGaps
	// The second probe arrived, the first did not.
	c.onAckBlock(now+5000, &AckBlock{Path: 1, PathGen: p.gen, Cum: first, Sack: [sackWords]uint64{1}})
	require.False(t, p.unproven, "an ACK of the generation did not end the proof")
	require.Equal(t, gaps+1, p.c.SackGaps, "the lost probe was not found")
	require.True(t, p.slot(first).pending, "the lost probe is not queued for resend")
	require.Equal(t, srtt, p.srtt, "an RTT sample without a stamp")
}
