package metaroce_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// fixture is an established connection A->B with stream 0 open on both
// sides.
type fixture struct {
	p        *mempair.Pair
	ca, cb   *mr.Conn
	pa, pb   *verbs.ProtectionDomain
	cqa, cqb *verbs.CompletionQueue
	qa, qb   *mr.QueuePair
	src      *verbs.MemoryRegion // at A, 64 KiB of a pattern
}

func newFixture(t *testing.T, cfg mr.Config, link memlink.Config) *fixture {
	t.Helper()
	return newFixturePair(t, cfg, cfg, link)
}

// newFixturePair is newFixture with a configuration for each end.
func newFixturePair(t *testing.T, cfg, cfgB mr.Config, link memlink.Config) *fixture {
	t.Helper()
	if cfg.Paths == 0 {
		cfg.Paths = 4
	}
	if cfgB.Paths == 0 {
		cfgB.Paths = 4
	}
	if link.Delay == 0 {
		link.Delay = 2000
	}
	p, err := mempair.New(cfg, cfgB, link)
	require.NoError(t, err)
	f := &fixture{p: p}
	f.ca, f.cb, err = p.Connect(1e9)
	require.NoError(t, err)
	f.pa, f.pb = p.EP[0].AllocPD(), p.EP[1].AllocPD()
	f.cqa, f.cqb = verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	f.qa, err = f.ca.CreateQP(0, verbs.QPAttr{PD: f.pa, SendCQ: f.cqa, RecvCQ: f.cqa})
	require.NoError(t, err)
	f.qb, err = f.cb.CreateQP(0, verbs.QPAttr{PD: f.pb, SendCQ: f.cqb, RecvCQ: f.cqb})
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	f.src, err = f.pa.RegisterMR(buf, verbs.AccessLocalWrite)
	require.NoError(t, err)
	return f
}

// region registers n bytes filled with 0xEE at side pd.
func region(t *testing.T, pd *verbs.ProtectionDomain, n int, access verbs.Access) (*verbs.MemoryRegion, []byte) {
	t.Helper()
	return verbstest.Region(t, pd, n, verbstest.EE, access)
}

// wait runs until cq yields one completion and returns it.
func (f *fixture) wait(t *testing.T, cq *verbs.CompletionQueue) verbs.WorkCompletion {
	t.Helper()
	return verbstest.WaitOne(t, f.p, cq, 10e9)
}

func (f *fixture) post(t *testing.T, wr verbs.SendWR) {
	t.Helper()
	require.NoError(t, f.qa.PostSend(f.p.Now, wr))
}

func TestRemoteAccessErrors(t *testing.T) {
	f := newFixture(t, mr.Config{MTU: 1024}, memlink.Config{Seed: 1, Loss: 0.05})
	target, tb := region(t, f.pb, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	readOnly, rob := region(t, f.pb, 16<<10, verbs.AccessRemoteRead)
	private, pvb := region(t, f.pb, 16<<10, verbs.AccessLocalWrite)
	otherPD := f.p.EP[1].AllocPD()
	foreign, fb := region(t, otherPD, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	dead, db := region(t, f.pb, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	deadKey, deadAddr := dead.RKey(), dead.Addr()
	require.NoError(t, dead.Deregister())
	readDst, rdb := region(t, f.pa, 16<<10, verbs.AccessLocalWrite)

	cases := []struct {
		name string
		wr   verbs.SendWR
	}{
		{"wrong rkey", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 5000), RemoteAddr: target.Addr(), RKey: target.RKey() ^ 0x5a5a00}},
		{"out of bounds at the end", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 5000), RemoteAddr: target.Addr() + 16<<10 - 4000, RKey: target.RKey()}},
		{"below the region", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 100), RemoteAddr: target.Addr() - 1, RKey: target.RKey()}},
		{"write without remote-write access", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 3000), RemoteAddr: readOnly.Addr(), RKey: readOnly.RKey()}},
		{"write to a local-only region", verbs.SendWR{Opcode: verbs.WRWriteImm, Local: f.src.SGE(0, 3000), RemoteAddr: private.Addr(), RKey: private.RKey()}},
		{"read without remote-read access", verbs.SendWR{Opcode: verbs.WRRead, Local: readDst.SGE(0, 3000), RemoteAddr: private.Addr(), RKey: private.RKey()}},
		{"read out of bounds", verbs.SendWR{Opcode: verbs.WRRead, Local: readDst.SGE(0, 3000), RemoteAddr: target.Addr() + 15<<10, RKey: target.RKey()}},
		{"other protection domain", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 3000), RemoteAddr: foreign.Addr(), RKey: foreign.RKey()}},
		{"deregistered region", verbs.SendWR{Opcode: verbs.WRWrite, Local: f.src.SGE(0, 3000), RemoteAddr: deadAddr, RKey: deadKey}},
	}
	// The refused WRITE_IMM consumes this receive, with an error.
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 8}))
	for i, tc := range cases {
		before := f.cb.Counters().AccessViolations
		tc.wr.ID = uint64(100 + i)
		f.post(t, tc.wr)
		wc := f.wait(t, f.cqa)
		require.Equal(t, tc.wr.ID, wc.WRID, tc.name)
		require.Equal(t, verbs.StatusRemoteAccessError, wc.Status, tc.name)
		require.Greater(t, f.cb.Counters().AccessViolations, before, tc.name)
	}
	for name, b := range map[string][]byte{"target": tb, "read-only": rob, "private": pvb, "foreign": fb, "deregistered": db, "read destination": rdb} {
		require.Equal(t, bytes.Repeat([]byte{0xEE}, len(b)), b, "%s memory changed", name)
	}
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(8), rc.WRID)
	require.Equal(t, verbs.StatusLocalAccessError, rc.Status)
	// Receives stay aligned: a correct WRITE_IMM afterwards lands in the
	// next one.
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 9}))
	f.post(t, verbs.SendWR{ID: 10, Opcode: verbs.WRWriteImm, Local: f.src.SGE(0, 3000), RemoteAddr: target.Addr(), RKey: target.RKey(), Imm: 5})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	wc := f.wait(t, f.cqb)
	require.Equal(t, verbs.WorkCompletion{WRID: 9, Status: verbs.StatusSuccess, Opcode: verbs.WCRecvWriteImm, ByteLen: 3000, Imm: 5, HasImm: true, QPN: f.qb.QPN()}, wc)
	require.Equal(t, f.src.Bytes()[:3000], tb[:3000])
}

func TestSendLongerThanReceiveFailsBothSides(t *testing.T) {
	f := newFixture(t, mr.Config{MTU: 1024}, memlink.Config{Seed: 2, Loss: 0.02})
	dst, db := region(t, f.pb, 8<<10, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 1, Local: dst.SGE(0, 2000)}))
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(4096, 4096)}))
	f.post(t, verbs.SendWR{ID: 11, Opcode: verbs.WRSend, Local: f.src.SGE(0, 5000)})
	f.post(t, verbs.SendWR{ID: 12, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
	w1, w2 := f.wait(t, f.cqa), f.wait(t, f.cqa)
	require.Equal(t, uint64(11), w1.WRID)
	require.Equal(t, verbs.StatusLocalLengthError, w1.Status)
	require.Equal(t, uint64(12), w2.WRID)
	require.Equal(t, verbs.StatusSuccess, w2.Status)
	r1, r2 := f.wait(t, f.cqb), f.wait(t, f.cqb)
	require.Equal(t, uint64(1), r1.WRID)
	require.Equal(t, verbs.StatusLocalLengthError, r1.Status)
	require.Equal(t, uint64(2), r2.WRID)
	require.Equal(t, verbs.StatusSuccess, r2.Status)
	require.Equal(t, uint32(3000), r2.ByteLen)
	require.Equal(t, bytes.Repeat([]byte{0xEE}, 4096), db[:4096], "nothing of the refused SEND may land")
	require.Equal(t, f.src.Bytes()[:3000], db[4096:7096])
}

func TestReceiverNotReady(t *testing.T) {
	t.Run("retries until a receive is posted", func(t *testing.T) {
		f := newFixture(t, mr.Config{RNRRetries: 7, RNRBackoff: 20 * time.Microsecond}, memlink.Config{Seed: 3})
		dst, db := region(t, f.pb, 8<<10, verbs.AccessLocalWrite)
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSendImm, Local: f.src.SGE(0, 6000), Imm: 77})
		// Let a few RNR rounds happen, then post the receive.
		require.NoError(t, f.p.RunUntil(func() bool { return f.ca.Counters().RNRRetries >= 2 }, f.p.Now+1e9))
		require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 8<<10)}))
		w := f.wait(t, f.cqa)
		require.Equal(t, verbs.StatusSuccess, w.Status, "%+v\n%s\n%s", w, mr.DebugString(f.ca), mr.DebugString(f.cb))
		rc := f.wait(t, f.cqb)
		require.Equal(t, verbs.StatusSuccess, rc.Status)
		require.Equal(t, uint32(6000), rc.ByteLen)
		require.Equal(t, uint32(77), rc.Imm)
		require.Equal(t, f.src.Bytes()[:6000], db[:6000])
	})
	t.Run("gives up after the retry count", func(t *testing.T) {
		f := newFixture(t, mr.Config{RNRRetries: 3, RNRBackoff: 10 * time.Microsecond}, memlink.Config{Seed: 4})
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 100)})
		wc := f.wait(t, f.cqa)
		require.Equal(t, verbs.StatusRNRRetryExceeded, wc.Status)
		require.Equal(t, uint64(3), f.ca.Counters().RNRRetries)
		// As a verbs QP would, the stream is now in the error state; other
		// streams of the connection are unaffected.
		require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{ID: 3, Opcode: verbs.WRSend}), mr.ErrStreamError)
		qa1, err := f.ca.CreateQP(1, verbs.QPAttr{PD: f.pa, SendCQ: f.cqa})
		require.NoError(t, err)
		qb1, err := f.cb.CreateQP(1, verbs.QPAttr{PD: f.pb, RecvCQ: f.cqb})
		require.NoError(t, err)
		dst, db := region(t, f.pb, 128, verbs.AccessLocalWrite)
		require.NoError(t, qb1.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 128)}))
		require.NoError(t, qa1.PostSend(f.p.Now, verbs.SendWR{ID: 4, Opcode: verbs.WRSend, Local: f.src.SGE(0, 100)}))
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		require.Equal(t, f.src.Bytes()[:100], db[:100])
	})
}

func TestUnknownConnectionAndReplay(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 6})
	target, tb := region(t, f.pb, 8<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	var captured [][]byte
	f.p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		if from == 0 {
			captured = append(captured, append([]byte(nil), pkt...))
		}
	}
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 8<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	f.p.Tap = nil
	require.Equal(t, f.src.Bytes()[:8<<10], tb)

	// The application at B reuses its memory; replaying the old packets
	// must not bring the old bytes back.
	for i := range tb {
		tb[i] = 0x11
	}
	dupBefore := f.cb.Counters().Duplicates
	for _, pkt := range captured {
		f.p.EP[1].Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
	}
	require.Equal(t, bytes.Repeat([]byte{0x11}, len(tb)), tb)
	require.Greater(t, f.cb.Counters().Duplicates, dupBefore)

	// The same packets aimed at a connection id B does not have are
	// dropped, counted and answered with RESET; A's connection is not hurt
	// by a RESET that names another connection.
	unknownBefore := f.p.EP[1].Counters().UnknownConn
	for _, pkt := range captured {
		forged := append([]byte(nil), pkt...)
		forged[4], forged[5], forged[6], forged[7] = 0, 0, 0x30, 0x39 // dst_conn 12345
		n := mr.SealCRC(forged, len(forged)-mr.CRCLen)
		f.p.EP[1].Receive(f.p.Now, forged[:n], verbs.RxMeta{Peer: 0})
	}
	require.Equal(t, unknownBefore+uint64(len(captured)), f.p.EP[1].Counters().UnknownConn)
	require.Equal(t, bytes.Repeat([]byte{0x11}, len(tb)), tb)
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	require.True(t, f.ca.Established(), "a RESET for another connection id must not tear this one down")

	// Replayed packets of an old incarnation of A are stale at B.
	staleBefore := f.cb.Counters().StalePackets
	for _, pkt := range captured {
		old := append([]byte(nil), pkt...)
		old[12] ^= 0xff // incarnation
		n := mr.SealCRC(old, len(old)-mr.CRCLen)
		f.p.EP[1].Receive(f.p.Now, old[:n], verbs.RxMeta{Peer: 0})
	}
	require.Equal(t, staleBefore+uint64(len(captured)), f.cb.Counters().StalePackets)
	require.Equal(t, bytes.Repeat([]byte{0x11}, len(tb)), tb)
}

func TestPeerRestartFailsOutstandingWork(t *testing.T) {
	f := newFixture(t, mr.Config{PeerDeadTimeout: time.Second, KeepaliveInterval: 100 * time.Millisecond}, memlink.Config{Seed: 8})
	target, _ := region(t, f.pb, 4<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	big := make([]byte, 4<<20)
	ms, err := f.pa.RegisterMR(big, 0)
	require.NoError(t, err)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, len(big)), RemoteAddr: target.Addr(), RKey: target.RKey()})
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRWrite, Local: ms.SGE(0, len(big)), RemoteAddr: target.Addr(), RKey: target.RKey()})
	before := f.cb.Counters().PayloadPlaced
	require.NoError(t, f.p.RunUntil(func() bool { return f.cb.Counters().PayloadPlaced > before }, f.p.Now+1e9))
	// B restarts: a new endpoint with the same node id and a new
	// incarnation takes its place. A's packets now reach a stranger.
	nb, err := mr.NewEndpoint(mr.Config{Paths: 4, Node: 2, Incarnation: 99, AcceptIncoming: true})
	require.NoError(t, err)
	f.p.Replace(1, nb)
	w1, w2 := f.wait(t, f.cqa), f.wait(t, f.cqa)
	require.Equal(t, uint64(1), w1.WRID)
	require.Equal(t, verbs.StatusRetryExceeded, w1.Status)
	require.Equal(t, uint64(2), w2.WRID)
	require.NotEqual(t, verbs.StatusSuccess, w2.Status)
	require.Equal(t, "failed", f.ca.State())
	require.Greater(t, nb.Counters().ResetsSent, uint64(0))
	// The stranger does not know the connection: its RESETs cannot prove
	// the connection's token (token.go), so A counts them and ignores
	// them, as it would a forger's, and finds the peer dead instead.
	require.Greater(t, f.ca.Counters().BadTags, uint64(0))
	require.Equal(t, verbs.FailPeerDead, f.ca.FailReason())
}

func TestPeerDeadTimeout(t *testing.T) {
	cfg := mr.Config{PeerDeadTimeout: 20 * time.Millisecond, KeepaliveInterval: 2 * time.Millisecond}
	f := newFixture(t, cfg, memlink.Config{Seed: 9})
	target, _ := region(t, f.pb, 1<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	// From now on the link carries nothing at all.
	for _, e := range []uint16{49152, 49153, 49154, 49155} {
		f.p.Link.AddBlackout(memlink.Blackout{Entropy: e, AnyPlane: true, At: int64(f.p.Now)})
	}
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	start := f.p.Now
	wc := f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusRetryExceeded, wc.Status)
	took := time.Duration(f.p.Now - start)
	require.GreaterOrEqual(t, took, 20*time.Millisecond)
	require.Less(t, took, 25*time.Millisecond)
	require.Equal(t, "failed", f.ca.State())
	require.Equal(t, verbs.FailPeerDead, f.ca.FailReason())
}

func TestIdleConnectionStaysUpOnKeepalives(t *testing.T) {
	cfg := mr.Config{PeerDeadTimeout: 20 * time.Millisecond, KeepaliveInterval: 2 * time.Millisecond}
	f := newFixture(t, cfg, memlink.Config{Seed: 10, Loss: 0.2})
	end := f.p.Now + verbs.Time(time.Second)
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Now >= end }, end+1e9))
	require.True(t, f.ca.Established())
	require.True(t, f.cb.Established())
}

func TestCloseFlushesBothSides(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 11})
	recv, _ := region(t, f.pb, 128, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 5, Local: recv.SGE(0, 128)}))
	f.post(t, verbs.SendWR{ID: 6, Opcode: verbs.WRRead, Local: f.src.SGE(0, 100), RemoteAddr: 1 << 40, RKey: 0})
	f.ca.Close(f.p.Now)
	wc := f.wait(t, f.cqa)
	require.Equal(t, uint64(6), wc.WRID)
	require.Equal(t, verbs.StatusFlushed, wc.Status)
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(5), rc.WRID)
	require.Equal(t, verbs.StatusFlushed, rc.Status)
	// A receive no message reached is still reported as a receive, as
	// rocev2 does: the verbs library tells send and receive completions
	// apart by it.
	require.Equal(t, verbs.WCRecv, rc.Opcode)
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.EP[0].Connections() == 0 && f.p.EP[1].Connections() == 0 }, f.p.Now+1e9))
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRSend}), mr.ErrNotUsable)
	// An orderly close is no failure, at either end.
	require.Equal(t, verbs.FailNone, f.ca.FailReason())
	require.Equal(t, verbs.FailNone, f.cb.FailReason())
}

func TestConnectRefused(t *testing.T) {
	p, err := mempair.New(mr.Config{}, mr.Config{}, memlink.Config{Seed: 12})
	require.NoError(t, err)
	// A connects to B and B to A; A does not accept connections.
	c, err := p.EP[1].Connect(p.Now, 0)
	require.NoError(t, err)
	require.NoError(t, p.RunUntil(func() bool { return c.State() == "failed" }, 1e9))
	require.Equal(t, uint64(1), p.EP[0].Counters().ConnectsRefused)
	require.Equal(t, verbs.FailRefused, c.FailReason())
}

// TestConnectUnansweredFails: a CONNECT nobody answers fails the
// connection after its retries, and says it went unanswered (not refused,
// not a dead peer).
func TestConnectUnansweredFails(t *testing.T) {
	// The link drops every packet.
	p, err := mempair.New(mr.Config{}, mr.Config{}, memlink.Config{Seed: 14, Loss: 1})
	require.NoError(t, err)
	start := p.Now
	c, err := p.EP[0].Connect(p.Now, 1)
	require.NoError(t, err)
	require.Equal(t, verbs.FailNone, c.FailReason())
	require.NoError(t, p.RunUntil(func() bool { return c.State() == "failed" }, p.Now+verbs.Time(time.Minute)))
	require.Equal(t, verbs.FailConnectTimeout, c.FailReason())
	require.Equal(t, verbs.StatusRetryExceeded, c.Failure())
	// It gave up after its 20 attempts' doubling waits (1.43 s), not after
	// 20 fixed ones (20 ms), and sent each attempt once.
	cfg := mr.Config{}.Defaults()
	budget := verbs.RetryBudget(cfg.ConnectRetry, cfg.ConnectRetryMax, cfg.ConnectRetries)
	require.Equal(t, 1427*time.Millisecond, budget)
	took := time.Duration(p.Now - start)
	require.True(t, took >= budget && took < budget+time.Millisecond, "failed after %v, want %v", took, budget)
	require.Equal(t, uint64(cfg.ConnectRetries), p.Link.Stats().Sent, "CONNECTs sent")
}

// TestConnectOutlastsLateListener: the listener's answers can be late by
// much more than the first retry intervals (a process descheduled on a
// loaded host reads its socket a few hundred milliseconds late). Every
// packet sent in the first 300 ms arrives 300 ms late; the doubling waits
// keep the dialer trying until the answer comes. Before, the dialer gave up
// after 20 attempts 1 ms apart.
func TestConnectOutlastsLateListener(t *testing.T) {
	p, err := mempair.New(mr.Config{}, mr.Config{}, memlink.Config{Seed: 15})
	require.NoError(t, err)
	start := int64(p.Now)
	for e := uint16(49152); e < 49152+8; e++ { // every one of the default 8 paths
		p.Link.AddHold(memlink.Hold{Entropy: e, AnyPlane: true, At: start, Until: start + 300e6, Extra: 300e6})
	}
	c, err := p.EP[0].Connect(p.Now, 1)
	require.NoError(t, err)
	require.NoError(t, p.RunUntil(func() bool { return c.State() != "connecting" }, p.Now+verbs.Time(5*time.Second)))
	require.Equal(t, "established", c.State(), "fail reason %v", c.FailReason())
	require.GreaterOrEqual(t, int64(p.Now)-start, int64(300e6), "the answer was held")
}

// TestCloseSurvivesLostCloseAck: the peer removed its connection and its
// CLOSE_ACK was lost; the repeated CLOSE is answered with CLOSE_ACK, not
// RESET, so the close ends orderly.
func TestCloseSurvivesLostCloseAck(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 13})
	lost := 0
	f.p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		var h mr.Header
		if from == 1 && h.Decode(pkt) == nil && h.Opcode == mr.OpCloseAck && lost == 0 {
			lost++
			pkt[0] = 0xFF // version byte: the receiver drops it as malformed
		}
	}
	f.ca.Close(f.p.Now)
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.EP[0].Connections() == 0 }, f.p.Now+1e9))
	require.Equal(t, 1, lost)
	require.Equal(t, "closed", f.ca.State())
	require.Equal(t, verbs.StatusSuccess, f.ca.Failure())
}

// TestPostWhileConnecting: work posted before the connection is up goes out
// once it is, sized at the negotiated MTU.
func TestPostWhileConnecting(t *testing.T) {
	p, err := mempair.New(mr.Config{MTU: 4096}, mr.Config{MTU: 1024}, memlink.Config{Seed: 14, Delay: 2000, Loss: 0.05})
	require.NoError(t, err)
	ca, err := p.EP[0].Connect(p.Now, 1)
	require.NoError(t, err)
	pa := p.EP[0].AllocPD()
	cq := verbs.NewCompletionQueue(8)
	qa, err := ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq})
	require.NoError(t, err)
	src := make([]byte, 100_000)
	for i := range src {
		src[i] = byte(i)
	}
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	// The peer's region does not exist yet either: post the READ-free part
	// first (a WRITE needs the peer's rkey, so use SEND into a receive the
	// peer posts once it accepts).
	require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: ms.SGE(0, len(src))}))
	var cb *mr.Conn
	require.NoError(t, p.RunUntil(func() bool { cb, _ = p.EP[1].Accept(); return cb != nil }, 1e9))
	pb := p.EP[1].AllocPD()
	qb, err := cb.CreateQP(0, verbs.QPAttr{PD: pb, RecvCQ: cq})
	require.NoError(t, err)
	dst := make([]byte, len(src))
	md, err := pb.RegisterMR(dst, verbs.AccessLocalWrite)
	require.NoError(t, err)
	require.NoError(t, qb.PostRecv(p.Now, verbs.RecvWR{ID: 2, Local: md.SGE(0, len(dst))}))
	got := map[uint64]verbs.Status{}
	wcs := make([]verbs.WorkCompletion, 4)
	require.NoError(t, p.RunUntil(func() bool {
		n := cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			got[wc.WRID] = wc.Status
		}
		return len(got) == 2
	}, p.Now+1e9))
	require.Equal(t, map[uint64]verbs.Status{1: verbs.StatusSuccess, 2: verbs.StatusSuccess}, got)
	require.Equal(t, 1024, ca.MTU())
	require.Equal(t, src, dst)
}

// TestConnectionsUseDistinctSourcePorts: two connections between the same
// hosts spray over different entropy values.
func TestConnectionsUseDistinctSourcePorts(t *testing.T) {
	p, err := mempair.New(mr.Config{Paths: 4}, mr.Config{Paths: 4}, memlink.Config{Seed: 15, Delay: 1000})
	require.NoError(t, err)
	seen := map[mr.ConnID]map[verbs.Entropy]bool{}
	p.Tap = func(from int, pkt []byte, meta verbs.TxMeta) {
		var h mr.Header
		if from == 0 && h.Decode(pkt) == nil && h.SrcConn != 0 && h.Opcode != mr.OpConnect {
			if seen[h.SrcConn] == nil {
				seen[h.SrcConn] = map[verbs.Entropy]bool{}
			}
			seen[h.SrcConn][meta.Entropy] = true
		}
	}
	c1, _, err := p.Connect(1e9)
	require.NoError(t, err)
	c2, _, err := p.Connect(p.Now + 1e9)
	require.NoError(t, err)
	end := p.Now + 100e6
	require.NoError(t, p.RunUntil(func() bool { return p.Now >= end }, end+1e9))
	require.Len(t, seen[c1.LocalID()], 4)
	require.Len(t, seen[c2.LocalID()], 4)
	for e := range seen[c1.LocalID()] {
		require.False(t, seen[c2.LocalID()][e], "entropy %d used by both connections", e)
	}
}
