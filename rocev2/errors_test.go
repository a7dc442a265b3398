package rocev2_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestRemoteAccessErrors: a WRITE or READ with a wrong rkey, out of
// bounds, without the access right, into another protection domain or a
// deregistered region is answered with a remote access error NAK; the
// requester's work request fails with StatusRemoteAccessError and both QPs
// go to the error state (as on a NIC: an access violation is fatal to the
// QP). Nothing is placed anywhere.
func TestRemoteAccessErrors(t *testing.T) {
	type setup struct {
		f                                  *fixture
		target, readOnly, private, foreign *verbs.MemoryRegion
		deadKey                            verbs.RKey
		deadAddr                           uint64
		readDst                            *verbs.MemoryRegion
		bufs                               map[string][]byte
	}
	build := func(t *testing.T, seed int64) *setup {
		// No loss: a responder in the error state drops everything, so a
		// lost error NAK ends in retry exceeded, as on a NIC.
		f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: seed})
		s := &setup{f: f, bufs: map[string][]byte{}}
		var b []byte
		s.target, b = region(t, f.pb, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		s.bufs["target"] = b
		s.readOnly, b = region(t, f.pb, 16<<10, verbs.AccessRemoteRead)
		s.bufs["read-only"] = b
		s.private, b = region(t, f.pb, 16<<10, verbs.AccessLocalWrite)
		s.bufs["private"] = b
		s.foreign, b = region(t, f.eb.AllocPD(), 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		s.bufs["foreign"] = b
		dead, b := region(t, f.pb, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		s.bufs["deregistered"] = b
		s.deadKey, s.deadAddr = dead.RKey(), dead.Addr()
		require.NoError(t, dead.Deregister())
		s.readDst, b = region(t, f.pa, 16<<10, verbs.AccessLocalWrite)
		s.bufs["read destination"] = b
		return s
	}
	cases := []struct {
		name string
		wr   func(s *setup) verbs.SendWR
	}{
		{"wrong rkey", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 5000), RemoteAddr: s.target.Addr(), RKey: s.target.RKey() ^ 0x5a5a00}
		}},
		{"out of bounds at the end", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 5000), RemoteAddr: s.target.Addr() + 16<<10 - 4000, RKey: s.target.RKey()}
		}},
		{"below the region", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 100), RemoteAddr: s.target.Addr() - 1, RKey: s.target.RKey()}
		}},
		{"write without remote-write access", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 3000), RemoteAddr: s.readOnly.Addr(), RKey: s.readOnly.RKey()}
		}},
		{"write with immediate to a local-only region", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWriteImm, Local: s.f.src.SGE(0, 3000), RemoteAddr: s.private.Addr(), RKey: s.private.RKey()}
		}},
		{"read without remote-read access", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRRead, Local: s.readDst.SGE(0, 3000), RemoteAddr: s.private.Addr(), RKey: s.private.RKey()}
		}},
		{"read out of bounds", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRRead, Local: s.readDst.SGE(0, 3000), RemoteAddr: s.target.Addr() + 15<<10, RKey: s.target.RKey()}
		}},
		{"other protection domain", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 3000), RemoteAddr: s.foreign.Addr(), RKey: s.foreign.RKey()}
		}},
		{"deregistered region", func(s *setup) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.WRWrite, Local: s.f.src.SGE(0, 3000), RemoteAddr: s.deadAddr, RKey: s.deadKey}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t, int64(10+i))
			f := s.f
			require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 8}))
			wr := tc.wr(s)
			wr.ID = 100
			f.post(t, wr)
			f.post(t, verbs.SendWR{ID: 101, Opcode: verbs.WRSend, Local: f.src.SGE(0, 10)})
			wc := f.wait(t, f.cqa)
			require.Equal(t, uint64(100), wc.WRID)
			require.Equal(t, verbs.StatusRemoteAccessError, wc.Status)
			wc = f.wait(t, f.cqa)
			require.Equal(t, uint64(101), wc.WRID)
			require.Equal(t, verbs.StatusFlushed, wc.Status, "the QP is in error: the rest is flushed")
			require.Equal(t, uint64(1), f.cb.Counters().AccessErrors)
			require.Equal(t, "error", f.ca.State())
			require.Equal(t, "error", f.cb.State())
			require.Equal(t, verbs.FailRemoteError, f.ca.FailReason(), "the peer refused the request")
			require.Equal(t, verbs.FailLocalError, f.cb.FailReason(), "this end refused the peer's request")
			rc := f.wait(t, f.cqb)
			require.Equal(t, uint64(8), rc.WRID)
			require.Equal(t, verbs.StatusFlushed, rc.Status)
			for name, b := range s.bufs {
				require.Equal(t, bytes.Repeat([]byte{0xEE}, len(b)), b, "%s memory changed", name)
			}
		})
	}
}

// TestSendLongerThanReceive: the responder refuses a SEND that does not fit
// the posted receive: invalid request NAK at the requester, local length
// error on the receive, nothing written past the buffer.
func TestSendLongerThanReceive(t *testing.T) {
	f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 20})
	buf, bb := region(t, f.pb, 8192, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 5, Local: buf.SGE(0, 2500)}))
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
	wc := f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusRemoteInvalidReq, wc.Status)
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(5), rc.WRID)
	require.Equal(t, verbs.StatusLocalLengthError, rc.Status)
	require.Equal(t, bytes.Repeat([]byte{0xEE}, 8192-2048), bb[2048:], "nothing beyond the two packets that fit")
	require.Equal(t, uint64(1), f.cb.Counters().InvalidRequests)
}

// TestUnknownQPIsDroppedSilently: packets for a QP number the endpoint does
// not have are counted and dropped without an answer, as NICs do.
func TestUnknownQPIsDroppedSilently(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 22})
	h := rocev2.BTH{Opcode: rocev2.OpSendOnly, PKey: 0xFFFF, DestQP: 0xABCDE, PSN: 1}
	buf := make([]byte, 64)
	h.Put(buf)
	n := rocev2.SealICRC(buf, rocev2.BTHLen, rocev2.Flow{})
	f.eb.Receive(f.p.Now, buf[:n], verbs.RxMeta{Peer: 0})
	require.Equal(t, uint64(1), f.eb.Counters().UnknownQP)
	_, ok := f.eb.NextPacket(f.p.Now, make([]byte, f.eb.MaxPacketLen()))
	require.False(t, ok)
}

func TestConnectRefused(t *testing.T) {
	p, ea, eb := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 23})
	// B connects to A, which does not accept connections.
	c, err := eb.Connect(p.Now, 0)
	require.NoError(t, err)
	require.NoError(t, p.RunUntil(func() bool { return c.State() == "closed" }, 1e9))
	require.Equal(t, verbs.StatusRetryExceeded, c.Failure())
	require.Equal(t, verbs.FailRefused, c.FailReason(), "a CM REJ")
	require.Equal(t, uint64(1), ea.Counters().CMRejectsSent)
}

// TestConnectUnanswered: a REQ nobody answers fails the QP after its
// retries, as unanswered, not refused.
func TestConnectUnanswered(t *testing.T) {
	p, _, eb := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 24, Loss: 1})
	start := p.Now
	c, err := eb.Connect(p.Now, 0)
	require.NoError(t, err)
	require.Equal(t, verbs.FailNone, c.FailReason())
	require.NoError(t, p.RunUntil(func() bool { return c.State() == "closed" }, p.Now+verbs.Time(time.Minute)))
	require.Equal(t, verbs.FailConnectTimeout, c.FailReason())
	// 15 REQs with doubling waits from 1 ms to 100 ms: 0.93 s in all.
	cfg := rocev2.Config{}.Defaults()
	budget := verbs.RetryBudget(cfg.ConnectRetry, cfg.ConnectRetryMax, cfg.ConnectRetries)
	require.Equal(t, 927*time.Millisecond, budget)
	took := time.Duration(p.Now - start)
	require.True(t, took >= budget && took < budget+time.Millisecond, "failed after %v, want %v", took, budget)
	require.Equal(t, uint64(cfg.ConnectRetries), p.Link.Stats().Sent, "REQs sent")
}

// TestConnectOutlastsLateListener: REQs that reach the listener 300 ms
// late (a descheduled process) still connect: the REQ's doubling waits
// outlast the stall, as an HCA's CM with its seconds-long response
// timeout would. CM messages travel on the GSI's source port.
func TestConnectOutlastsLateListener(t *testing.T) {
	p, ea, _ := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 25})
	start := int64(p.Now)
	c, err := ea.Connect(p.Now, 1)
	require.NoError(t, err)
	p.Link.AddHold(memlink.Hold{Entropy: rocev2.GSIPort, AnyPlane: true, At: start, Until: start + 300e6, Extra: 300e6})
	require.NoError(t, p.RunUntil(func() bool { return c.State() != "connecting" }, p.Now+verbs.Time(5*time.Second)))
	require.Equal(t, "established", c.State(), "state %s after %v, fail reason %v", c.State(), time.Duration(int64(p.Now)-start), c.FailReason())
	require.GreaterOrEqual(t, int64(p.Now)-start, int64(300e6), "the REQs were held")
}

func TestConnectSurvivesLossOfCMPackets(t *testing.T) {
	p, ea, eb := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 24, Loss: 0.5})
	ca, cb := connect(t, p, ea, eb)
	require.True(t, ca.Established())
	require.NoError(t, p.RunUntil(func() bool { return cb.Established() }, p.Now+1e9))
	require.Equal(t, ca.QPN(), cb.RemoteQPN())
	require.Equal(t, cb.QPN(), ca.RemoteQPN())
	require.Equal(t, 1, eb.Connections(), "repeated REQs do not open more QPs")
}

func TestCloseFlushesBothSides(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 25})
	recv, _ := region(t, f.pb, 128, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 5, Local: recv.SGE(0, 128)}))
	f.ca.Close(f.p.Now)
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(5), rc.WRID)
	require.Equal(t, verbs.StatusFlushed, rc.Status)
	require.NoError(t, f.p.RunUntil(func() bool { return f.ea.Connections() == 0 && f.eb.Connections() == 0 }, f.p.Now+1e9))
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRSend}), rocev2.ErrNotUsable)
}

func TestRequestsBeforeCreateQPAreNotReady(t *testing.T) {
	p, ea, eb := pair(t, rocev2.Config{MinRNRTimer: 1}, rocev2.Config{}, memlink.Config{Seed: 26, Delay: 1000})
	ca, cb := connect(t, p, ea, eb)
	pa := ea.AllocPD()
	cq := verbs.NewCompletionQueue(4)
	qa, err := ca.CreateQP(verbs.QPAttr{PD: pa, SendCQ: cq})
	require.NoError(t, err)
	src, err := pa.RegisterMR(make([]byte, 100), 0)
	require.NoError(t, err)
	require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: src.SGE(0, 100)}))
	require.NoError(t, p.RunUntil(func() bool { return ca.Counters().RNRNaksReceived > 0 }, p.Now+1e9))
	pb := eb.AllocPD()
	qb, err := cb.CreateQP(verbs.QPAttr{PD: pb, RecvCQ: cq})
	require.NoError(t, err)
	_, err = cb.CreateQP(verbs.QPAttr{PD: pb})
	require.ErrorIs(t, err, rocev2.ErrQPExists)
	dst, err := pb.RegisterMR(make([]byte, 100), verbs.AccessLocalWrite)
	require.NoError(t, err)
	require.NoError(t, qb.PostRecv(p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 100)}))
	var wc [2]verbs.WorkCompletion
	got := 0
	require.NoError(t, p.RunUntil(func() bool { got += cq.Poll(wc[got:]); return got == 2 }, p.Now+1e9))
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)
	require.Equal(t, verbs.StatusSuccess, wc[1].Status)
}

func TestLocalChecks(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 27})
	ro, _ := region(t, f.pa, 100, 0)
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRRead, Local: ro.SGE(0, 10)}), verbs.ErrBadSGE,
		"a READ needs local write access")
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRSend, Local: ro.SGE(50, 51)}), verbs.ErrBadSGE)
	require.ErrorIs(t, f.qa.PostRecv(f.p.Now, verbs.RecvWR{Local: ro.SGE(0, 10)}), verbs.ErrBadSGE)
	_, err := f.pa.RegisterMR(make([]byte, 10), verbs.AccessRemoteWrite)
	require.ErrorIs(t, err, verbs.ErrBadAccess)
}
