package metaroce

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

func TestRxWindowBoundsAndBase(t *testing.T) {
	c := &Conn{mtu: 100}
	q := &QueuePair{conn: c}
	w := &q.rxw

	// Message 1 (one chunk) completes before message 0: base waits.
	require.Equal(t, winFresh, adm(c, w, 1, 50, 0))
	c.advance(q)
	require.Equal(t, MsgSeq(0), w.base)
	// Message 0 has 3 chunks, placed out of order, each once.
	require.Equal(t, winFresh, adm(c, w, 0, 300, 2))
	require.Equal(t, winDup, adm(c, w, 0, 300, 2))
	require.Equal(t, winMismatch, adm(c, w, 0, 200, 1), "a packet contradicting the message's first")
	require.Equal(t, winFresh, adm(c, w, 0, 300, 0))
	c.advance(q)
	require.Equal(t, MsgSeq(0), w.base)
	require.Equal(t, winFresh, adm(c, w, 0, 300, 1))
	c.advance(q)
	require.Equal(t, MsgSeq(2), w.base, "both done: base passes them")
	require.Equal(t, winDup, adm(c, w, 0, 300, 0), "below base: done")
	require.Equal(t, winDup, adm(c, w, 1, 50, 0))

	// Bounds: the last message of the window is tracked, the next is not.
	require.Equal(t, winBeyond, adm(c, w, 2+MsgWindow, 10, 0))
	require.Equal(t, winFresh, adm(c, w, 2+MsgWindow-1, 1000, 3))
	require.Len(t, w.ents, MsgWindow)
	require.Equal(t, winDup, adm(c, w, 2+MsgWindow-1, 1000, 3), "kept across growth")
}

func TestRxWindowGrowKeepsEntriesAndWraps(t *testing.T) {
	c := &Conn{mtu: 10}
	q := &QueuePair{conn: c}
	w := &q.rxw
	w.base = math.MaxUint32 - 2 // msg_seq wraps inside the window
	for k := range MsgSeq(6) {
		require.Equal(t, winFresh, adm(c, w, w.base+k, 20, 0))
	}
	require.Len(t, w.ents, 8)
	require.Equal(t, winFresh, adm(c, w, w.base+40, 20, 0)) // grows to 64
	require.Len(t, w.ents, 64)
	for k := range MsgSeq(6) {
		require.Equal(t, winDup, adm(c, w, w.base+k, 20, 0), "message %d lost its chunks in growth", k)
		require.Equal(t, winFresh, adm(c, w, w.base+k, 20, 1))
	}
	c.advance(q)
	require.Equal(t, MsgSeq(3), w.base, "base crossed 2^32")
}

func TestRxWindowFailAndBudget(t *testing.T) {
	c := &Conn{mtu: 10}
	q := &QueuePair{conn: c}
	w := &q.rxw
	require.Equal(t, winFresh, adm(c, w, 1, 10, 0))
	c.winFail(q, 0) // message 0 was NAK'd with an error: done
	c.advance(q)
	require.Equal(t, MsgSeq(2), w.base)

	// Chunk-set storage: a message of 64·3 chunks needs two words past the
	// inline one; with one word left in the budget it is refused.
	c.winWords = maxWindowWords - 1
	require.Equal(t, winBeyond, adm(c, w, 2, 64*3*10, 0))
	c.winWords = 0
	require.Equal(t, winFresh, adm(c, w, 2, 64*3*10, 130))
	require.Equal(t, 2, c.winWords)
	c.clearWindow(q)
	require.Zero(t, c.winWords)
	require.Equal(t, MsgSeq(2), w.base)
}

// windowRig is a wirePair with one stream open at both ends, a source
// region at the requester and a target region at the responder.
type windowRig struct {
	w        *wirePair
	ca, cb   *Conn
	qa, qb   *QueuePair
	cqa, cqb *verbs.CompletionQueue
	mra, mrb *verbs.MemoryRegion
	src, dst []byte
}

func newWindowRig(t *testing.T, cfg Config) *windowRig {
	r := &windowRig{w: newWirePair(t, cfg)}
	r.ca, r.cb = r.w.connect(t)
	pda, pdb := r.w.ep[0].AllocPD(), r.w.ep[1].AllocPD()
	r.cqa, r.cqb = verbs.NewCompletionQueue(1<<14), verbs.NewCompletionQueue(1<<14)
	var err error
	r.qa, err = r.ca.CreateQP(0, verbs.QPAttr{PD: pda, SendCQ: r.cqa, RecvCQ: r.cqa})
	require.NoError(t, err)
	r.qb, err = r.cb.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: r.cqb, RecvCQ: r.cqb})
	require.NoError(t, err)
	r.src = make([]byte, 256<<10)
	for i := range r.src {
		r.src[i] = byte(i*7 + 1)
	}
	r.mra, err = pda.RegisterMR(r.src, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	r.dst = make([]byte, 256<<10)
	r.mrb, err = pdb.RegisterMR(r.dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	return r
}

func (r *windowRig) write(t *testing.T, id uint64, off, n, at int) {
	require.NoError(t, r.qa.PostSend(r.w.now, verbs.SendWR{ID: id, Opcode: verbs.WRWrite,
		Local: r.mra.SGE(off, n), RemoteAddr: r.mrb.Addr() + uint64(at), RKey: r.mrb.RKey()}))
}

func (r *windowRig) send(t *testing.T, id uint64, off, n int) {
	require.NoError(t, r.qa.PostSend(r.w.now, verbs.SendWR{ID: id, Opcode: verbs.WRSend, Local: r.mra.SGE(off, n)}))
}

func (r *windowRig) recv(t *testing.T, id uint64, at, n int) {
	require.NoError(t, r.qb.PostRecv(r.w.now, verbs.RecvWR{ID: id, Local: r.mrb.SGE(at, n)}))
}

// quiesce runs until nothing is left in flight and no timer is due before
// limit.
func (r *windowRig) quiesce(limit verbs.Time) {
	for r.w.now < limit && r.w.step() {
	}
}

func poll(cq *verbs.CompletionQueue) []verbs.WorkCompletion {
	buf := make([]verbs.WorkCompletion, 64)
	n := cq.Poll(buf)
	return buf[:n]
}

// TestMovedCopiesArePlacedOnce stalls one path long past its timeout, so
// its data packets are moved to the others and the messages complete on
// the copies; the originals arrive afterwards, on their own PSNs. The
// application reuses the target as soon as the WRITE's and the following
// SEND's completions are seen; no old byte may reappear, each copy that
// came late is counted, and PayloadPlaced is exactly the messages' bytes.
func TestMovedCopiesArePlacedOnce(t *testing.T) {
	r := newWindowRig(t, Config{Paths: 4, MTU: 1024})
	w := r.w
	// Path 0 holds everything sent on it in the first millisecond and
	// releases it, in order, at 1 ms (a queue behind a stalled link):
	// longer than its timeout, so its data is moved and the messages
	// complete on the copies; the originals arrive afterwards, ahead of
	// the path's own probes.
	release := w.now + verbs.Time(time.Millisecond)
	w.extra = func(from int, pkt []byte) verbs.Time {
		var h Header
		if from == 0 && h.Decode(pkt) == nil && h.Path == 0 && w.now < release {
			return release - w.now
		}
		return 0
	}
	const wlen, slen = 64 << 10, 3000
	r.recv(t, 7, 200<<10, slen)
	r.write(t, 1, 0, wlen, 0)
	r.send(t, 2, wlen, slen)
	var writeDone, recvDone bool
	w.runUntil(t, func() bool {
		for _, wc := range poll(r.cqa) {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
			writeDone = writeDone || wc.WRID == 1
		}
		for _, wc := range poll(r.cqb) {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
			recvDone = true
		}
		return writeDone && recvDone
	}, w.now+verbs.Time(20*time.Millisecond))
	require.Equal(t, r.src[:wlen], r.dst[:wlen], "the SEND completed before the WRITE was in place")
	dupsBefore := r.cb.Counters().DuplicateChunks
	clear(r.dst) // reuse: the application overwrites the target at once
	r.quiesce(w.now + verbs.Time(100*time.Millisecond))
	require.Empty(t, w.q)
	require.Equal(t, make([]byte, len(r.dst)), r.dst, "a late copy placed old bytes again")
	var moved uint64
	for i := range r.ca.NumPaths() {
		moved += r.ca.PathCounters(verbs.PathID(i)).MovedAway
	}
	require.NotZero(t, moved, "no packet was moved: the test did not test")
	require.Greater(t, r.cb.Counters().DuplicateChunks, dupsBefore, "no late copy arrived after the reuse")
	require.Equal(t, uint64(wlen+slen), r.cb.Counters().PayloadPlaced)
}

// TestPayloadPlacedUnderLossAndMoves: over many seeds with loss, delays
// that reorder and stall paths (so copies are moved), every byte of every
// message is placed once: PayloadPlaced equals the messages' bytes, and
// both orderings hold (a receive completes only after the WRITE before it
// is in place; a READ after a WRITE returns what the WRITE wrote).
func TestPayloadPlacedUnderLossAndMoves(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	var dups, cancelled uint64
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		r := newWindowRig(t, Config{Paths: 4, MTU: 1024})
		w := r.w
		w.drop = func(from int, pkt []byte) bool { return rng.IntN(100) < 2 }
		w.extra = func(from int, pkt []byte) verbs.Time {
			switch n := rng.IntN(100); {
			case n < 3:
				return verbs.Time(rng.IntN(3000)) * 1000 // up to 3 ms: past the RTO
			case n < 20:
				return verbs.Time(rng.IntN(20)) * 1000
			}
			return 0
		}
		wlen := 8<<10 + rng.IntN(40<<10)
		slen := 1 + rng.IntN(5000)
		r.recv(t, 7, 200<<10, slen)
		r.write(t, 1, 0, wlen, 0)
		r.send(t, 2, wlen, slen)
		// WRITE then READ of the same range, into the source region's tail.
		r.write(t, 3, 60<<10, wlen, 100<<10)
		rd := 128 << 10
		require.NoError(t, r.qa.PostSend(w.now, verbs.SendWR{ID: 4, Opcode: verbs.WRRead,
			Local: r.mra.SGE(rd, wlen), RemoteAddr: r.mrb.Addr() + 100<<10, RKey: r.mrb.RKey()}))
		sends, recvd := 0, false
		w.runUntil(t, func() bool {
			for _, wc := range poll(r.cqa) {
				require.Equal(t, verbs.StatusSuccess, wc.Status, "seed %d: %+v", seed, wc)
				sends++
			}
			for _, wc := range poll(r.cqb) {
				require.Equal(t, verbs.StatusSuccess, wc.Status)
				require.True(t, bytes.Equal(r.src[:wlen], r.dst[:wlen]), "seed %d: receive completed before the WRITE's bytes", seed)
				recvd = true
			}
			return sends == 4 && recvd
		}, w.now+verbs.Time(2*time.Second))
		require.Equal(t, r.src[60<<10:60<<10+wlen], r.src[rd:rd+wlen], "seed %d: the READ did not see the WRITE", seed)
		r.quiesce(w.now + verbs.Time(50*time.Millisecond))
		require.Equal(t, uint64(2*wlen+slen), r.cb.Counters().PayloadPlaced, "seed %d", seed)
		require.Equal(t, uint64(wlen), r.ca.Counters().PayloadPlaced, "seed %d", seed)
		dups += r.cb.Counters().DuplicateChunks
		cancelled += r.ca.Counters().CopiesCancelled
	}
	t.Logf("%d late copies not placed again, %d moved copies cancelled", dups, cancelled)
	require.NotZero(t, dups, "no seed moved a copy that arrived late")
}

// TestRxWindowEndings: every way a message ends at the sender lets the
// responder's window advance, or leaves it stuck at an abandoned message,
// bounded, until it is torn down (rxWindow).
func TestRxWindowEndings(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
		r.write(t, 1, 0, 5000, 0)
		r.quiesce(r.w.now + 1e9)
		require.Equal(t, MsgSeq(1), r.qb.rxw.base)
	})
	t.Run("nak error", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
		r.recv(t, 7, 0, 100)
		require.NoError(t, r.qa.PostSend(r.w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite,
			Local: r.mra.SGE(0, 5000), RemoteAddr: r.mrb.Addr(), RKey: r.mrb.RKey() + 99}))
		r.send(t, 2, 0, 100)
		r.quiesce(r.w.now + 1e9)
		wcs := poll(r.cqa)
		require.Len(t, wcs, 2)
		require.Equal(t, verbs.StatusRemoteAccessError, wcs[0].Status)
		require.Len(t, poll(r.cqb), 1, "the SEND behind a failed WRITE must complete")
		require.Equal(t, MsgSeq(2), r.qb.rxw.base)
	})
	t.Run("rnr restart", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024, RNRRetries: 20})
		r.send(t, 1, 0, 3000)
		r.write(t, 2, 0, 5000, 10000)
		r.quiesce(r.w.now + verbs.Time(time.Millisecond))
		require.Equal(t, MsgSeq(0), r.qb.rxw.base, "the RNR'd SEND holds the base")
		require.Equal(t, r.src[:5000], r.dst[10000:15000], "the WRITE behind it is placed meanwhile")
		r.recv(t, 7, 0, 3000)
		r.quiesce(r.w.now + 1e9)
		require.Len(t, poll(r.cqa), 2)
		require.Len(t, poll(r.cqb), 1)
		require.Equal(t, MsgSeq(2), r.qb.rxw.base)
		require.Equal(t, uint64(8000), r.cb.Counters().PayloadPlaced)
	})
	t.Run("rnr retries exceeded", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024, RNRRetries: 1})
		r.send(t, 1, 0, 3000)
		r.write(t, 2, 0, 5000, 10000)
		r.quiesce(r.w.now + 1e9)
		wcs := poll(r.cqa)
		require.Len(t, wcs, 2)
		require.Equal(t, verbs.StatusRNRRetryExceeded, wcs[0].Status)
		stuck(t, r)
	})
	t.Run("source deregistered mid-send", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
		r.write(t, 1, 0, 200<<10, 0)
		r.recv(t, 7, 210<<10, 100)
		r.send(t, 2, 0, 100)
		for r.cb.Counters().PayloadPlaced < 20<<10 {
			require.True(t, r.w.step())
		}
		require.NoError(t, r.mra.Deregister())
		r.quiesce(r.w.now + 1e9)
		wcs := poll(r.cqa)
		require.Len(t, wcs, 2)
		require.Equal(t, verbs.StatusLocalProtError, wcs[0].Status)
		require.Empty(t, poll(r.cqb), "the SEND behind an abandoned WRITE must not complete")
		stuck(t, r)
	})
	t.Run("sender queue pair destroyed", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
		r.write(t, 1, 0, 200<<10, 0)
		for r.cb.Counters().PayloadPlaced < 20<<10 {
			require.True(t, r.w.step())
		}
		require.NoError(t, r.qa.Destroy(r.w.now))
		r.quiesce(r.w.now + 1e9)
		require.Equal(t, verbs.StatusFlushed, poll(r.cqa)[0].Status)
		stuck(t, r)
	})
	t.Run("deferred READ, responder destroyed", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024, RNRRetries: 20})
		r.send(t, 1, 0, 100) // RNR: no receive posted
		require.NoError(t, r.qa.PostSend(r.w.now, verbs.SendWR{ID: 2, Opcode: verbs.WRRead,
			Local: r.mra.SGE(0, 4000), RemoteAddr: r.mrb.Addr(), RKey: r.mrb.RKey()}))
		r.quiesce(r.w.now + verbs.Time(time.Millisecond))
		require.Equal(t, 1, r.cb.deferredJobs, "the READ waits behind the SEND")
		require.Zero(t, r.cb.jobs.Len())
		require.NoError(t, r.qb.Destroy(r.w.now))
		require.Zero(t, r.cb.deferredJobs)
		require.Nil(t, r.qb.rxw.ents)
	})
	t.Run("deferred READ, connection closed", func(t *testing.T) {
		r := newWindowRig(t, Config{Paths: 2, MTU: 1024, RNRRetries: 20})
		r.send(t, 1, 0, 100)
		require.NoError(t, r.qa.PostSend(r.w.now, verbs.SendWR{ID: 2, Opcode: verbs.WRRead,
			Local: r.mra.SGE(0, 4000), RemoteAddr: r.mrb.Addr(), RKey: r.mrb.RKey()}))
		r.quiesce(r.w.now + verbs.Time(time.Millisecond))
		require.Equal(t, 1, r.cb.deferredJobs)
		r.cb.Close(r.w.now)
		require.Zero(t, r.cb.deferredJobs)
		require.Zero(t, r.cb.winWords)
		require.Nil(t, r.qb.rxw.ents)
	})
}

// stuck checks a window left at an abandoned message: bounded (the sender
// sends nothing new on a broken stream), and torn down by Destroy.
func stuck(t *testing.T, r *windowRig) {
	t.Helper()
	require.Equal(t, MsgSeq(0), r.qb.rxw.base)
	require.LessOrEqual(t, len(r.qb.rxw.ents), 8)
	require.NoError(t, r.qb.Destroy(r.w.now))
	require.Nil(t, r.qb.rxw.ents)
	require.Zero(t, r.cb.winWords)
}

// TestSenderKeepsToMsgWindow: with a send queue deeper than MsgWindow and
// the first message held (every copy of it lost for a while), the sender
// sends no message MsgWindow or more past it, nothing is refused as beyond
// the window, and all of it completes once the first gets through.
func TestSenderKeepsToMsgWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("posts 5000 messages")
	}
	r := newWindowRig(t, Config{Paths: 4, MTU: 1024, SendQueueDepth: 6000})
	hold := r.w.now + verbs.Time(3*time.Millisecond)
	r.w.drop = func(from int, pkt []byte) bool {
		var h Header
		var m MsgHeader
		return from == 0 && r.w.now < hold && h.Decode(pkt) == nil && h.Opcode == OpWrite &&
			msgOf(&h, &m, pkt) && m.MsgSeq == 0
	}
	const n = MsgWindow + 900
	for i := range n {
		r.write(t, uint64(i), i%1000, 8, 1000+(i%1000)*8)
	}
	most := 0
	var wcs int
	r.w.runUntil(t, func() bool {
		sent := 0
		for i := 0; i < r.qa.sq.Len(); i++ {
			if m := *r.qa.sq.At(i); m.segDone && m.seq-r.qa.sqBase >= MsgWindow {
				t.Fatalf("message %d sent with %d uncompleted", m.seq, r.qa.sqBase)
			} else if m.segDone {
				sent++
			}
		}
		if r.qa.sqBase == 0 {
			most = max(most, sent)
		}
		for _, wc := range poll(r.cqa) {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
			wcs++
		}
		return wcs == n
	}, r.w.now+verbs.Time(time.Second))
	require.Equal(t, MsgWindow, most, "messages sent while the first was held")
	require.Zero(t, r.cb.Counters().RNRNaksSent, "refused as beyond the window")
	require.LessOrEqual(t, len(r.qb.rxw.ents), MsgWindow)
}

// TestMovedCopyCancelledByOriginalAck: a path's data is moved at a
// timeout while no path has room for the copies; then the originals
// arrive and their ACK comes back first. The copies still waiting are not
// sent, and the message completes on the originals, each chunk once.
func TestMovedCopyCancelledByOriginalAck(t *testing.T) {
	r := newWindowRig(t, Config{Paths: 2, MTU: 1024})
	w, ea, eb := r.w, r.w.ep[0], r.w.ep[1]
	// A first WRITE opens the connection's in-flight cap.
	r.write(t, 9, 0, 64<<10, 64<<10)
	w.runUntil(t, func() bool { return len(poll(r.cqa)) == 1 }, w.now+1e9)
	r.quiesce(w.now + verbs.Time(time.Millisecond))
	base := *r.cb.Counters()
	const wlen = 4 << 10
	r.write(t, 1, 0, wlen, 0)
	var held [][]byte
	for {
		meta, ok := ea.NextPacket(w.now, w.buf)
		if !ok {
			break
		}
		held = append(held, append([]byte(nil), w.buf[:meta.Len]...))
	}
	require.Equal(t, 4, len(held))
	// Both paths time out (as onPathTimeout would): every chunk moves.
	r.ca.moveOutstanding(&r.ca.tx[0], true)
	r.ca.moveOutstanding(&r.ca.tx[1], true)
	require.Equal(t, 4, r.ca.moved.Len())
	// The originals arrive after all, and the ACK is back before the
	// sender builds another packet.
	w.now += 1000
	for _, pkt := range held {
		eb.Receive(w.now, pkt, verbs.RxMeta{Peer: 0})
	}
	acks := 0
	for {
		meta, ok := eb.NextPacket(w.now, w.buf)
		if !ok {
			break
		}
		ea.Receive(w.now, w.buf[:meta.Len], verbs.RxMeta{Peer: 1})
		acks++
	}
	require.NotZero(t, acks)
	wcs := poll(r.cqa)
	require.Len(t, wcs, 1, "the originals' ACK completes the WRITE")
	require.Equal(t, verbs.StatusSuccess, wcs[0].Status)
	r.quiesce(w.now + verbs.Time(10*time.Millisecond))
	require.Equal(t, uint64(4), r.ca.Counters().CopiesCancelled)
	require.Zero(t, r.ca.Counters().DataResent, "a cancelled copy was sent")
	require.Equal(t, base.DuplicateChunks, r.cb.Counters().DuplicateChunks)
	require.Equal(t, uint64(wlen), r.cb.Counters().PayloadPlaced-base.PayloadPlaced)
	require.Equal(t, r.src[:wlen], r.dst[:wlen])
	require.Zero(t, r.ca.moved.Len())
}

// TestBeyondWindowIsRefused: a WRITE packet MsgWindow messages past the
// responder's base (which a sender keeping to MsgWindow never sends) is
// answered RNR and places nothing; the last message inside is placed.
func TestBeyondWindowIsRefused(t *testing.T) {
	r := newWindowRig(t, Config{Paths: 1, MTU: 1024})
	w, eb := r.w, r.w.ep[1]
	psn := r.ca.tx[0].next
	forge := func(seq MsgSeq) []byte {
		pkt := make([]byte, eb.MaxPacketLen())
		h := Header{Opcode: OpWrite, Flags: FlagAckReq, DstConn: r.cb.LocalID(), SrcConn: r.ca.LocalID(),
			Incarnation: 11, Path: 0, PathGen: r.ca.tx[0].gen, PSN: psn, Timestamp: w.now}
		psn++
		h.Put(pkt)
		m := MsgHeader{Stream: 0, PayloadLen: 100, MsgSeq: seq, MsgLen: 100, RKey: r.mrb.RKey(), RemoteAddr: r.mrb.Addr()}
		el := m.Put(OpWrite, 0, pkt[HeaderLen:])
		copy(pkt[HeaderLen+el:], bytes.Repeat([]byte{0xAB}, 100))
		return pkt[:SealCRC(pkt, HeaderLen+el+100)]
	}
	eb.Receive(w.now, forge(MsgWindow), verbs.RxMeta{Peer: 0})
	require.Equal(t, uint64(1), r.cb.Counters().RNRNaksSent)
	require.Zero(t, r.cb.Counters().PayloadPlaced)
	require.Equal(t, make([]byte, 100), r.dst[:100])
	eb.Receive(w.now, forge(MsgWindow-1), verbs.RxMeta{Peer: 0})
	require.Equal(t, uint64(1), r.cb.Counters().RNRNaksSent)
	require.Equal(t, uint64(100), r.cb.Counters().PayloadPlaced)
	require.Equal(t, bytes.Repeat([]byte{0xAB}, 100), r.dst[:100])
	require.Zero(t, r.cb.Counters().Malformed)
}

// adm is admit's verdict alone.
func adm(c *Conn, w *rxWindow, seq MsgSeq, msgLen uint32, chunk int) winVerdict {
	_, v := c.admit(w, seq, msgLen, chunk)
	return v
}
