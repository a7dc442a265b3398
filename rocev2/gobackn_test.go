package rocev2_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// decode parses a packet the tests captured (it must be valid).
func decode(t testing.TB, pkt []byte) rocev2.Packet {
	t.Helper()
	var p rocev2.Packet
	require.NoError(t, p.Decode(pkt))
	return p
}

// dropper corrupts (so the receiver drops it on its ICRC) the packets from
// side `from` for which drop returns true.
func dropper(from int, drop func(p *rocev2.Packet) bool) func(int, []byte, verbs.TxMeta) {
	return func(side int, pkt []byte, _ verbs.TxMeta) {
		var p rocev2.Packet
		if side == from && p.Decode(pkt) == nil && drop(&p) {
			pkt[len(pkt)-1] ^= 0xFF
		}
	}
}

// TestSingleLossGoesBackN: one lost WRITE packet is answered by exactly
// one NAK (PSN sequence error, carrying the lost PSN); the packets after
// it are dropped by the responder, and the requester resends everything
// from the lost PSN on (go-back-N), not just the lost packet.
func TestSingleLossGoesBackN(t *testing.T) {
	f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 1, RateBps: 100e9})
	dst, db := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)

	var first rocev2.PSN
	started := false
	sends := map[rocev2.PSN]int{}
	dropped := false
	tap := dropper(0, func(p *rocev2.Packet) bool {
		if !p.BTH.Opcode.IsWrite() {
			return false
		}
		if !started {
			first, started = p.BTH.PSN, true
		}
		sends[p.BTH.PSN]++
		if p.BTH.PSN == first.Add(10) && !dropped {
			dropped = true
			return true
		}
		return false
	})
	f.p.Tap = tap
	var naks []rocev2.Packet
	f.p.RxTap = func(to int, pkt []byte) {
		if to == 0 {
			if p := decode(t, pkt); p.BTH.Opcode == rocev2.OpAcknowledge && p.AETH.Syndrome.Kind() == rocev2.KindNAK {
				naks = append(naks, p)
			}
		}
	}
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	wc := f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusSuccess, wc.Status)
	require.Equal(t, f.src.Bytes(), db)

	require.Len(t, naks, 1, "one NAK per gap episode")
	require.Equal(t, rocev2.SynNAKSequence, naks[0].AETH.Syndrome)
	require.Equal(t, first.Add(10), naks[0].BTH.PSN, "the NAK carries the expected PSN")

	// Go-back-N: every PSN from the lost one up to some X was sent twice,
	// nothing before it and nothing from X on.
	resent := 0
	for i := 0; i < 64; i++ {
		n := sends[first.Add(i)]
		switch {
		case i < 10:
			require.Equal(t, 1, n, "psn +%d", i)
		case i == 10:
			require.Equal(t, 2, n)
			resent++
		case n == 2:
			require.Equal(t, 2, sends[first.Add(i-1)], "resends are contiguous from the lost PSN")
			resent++
		default:
			require.Equal(t, 1, n)
		}
	}
	require.Greater(t, resent, 1, "packets after the lost one were resent too")
	ca, cb := f.ca.Counters(), f.cb.Counters()
	require.Equal(t, uint64(resent), ca.DataResent)
	require.Equal(t, uint64(1), ca.NaksReceived)
	require.Equal(t, uint64(1), ca.Retries)
	require.Zero(t, ca.Timeouts)
	require.Equal(t, uint64(1), cb.NaksSent)
	require.Equal(t, uint64(resent-1), cb.OutOfSequence, "every packet sent after the lost one before the resend was dropped")
	require.Equal(t, uint64(64<<10), cb.PayloadPlaced, "nothing placed twice")
}

// TestLostNakRecoversByTimeout: when the NAK itself is lost, the responder
// does not NAK again (one per episode); the requester's local ACK timeout
// goes back to the oldest unacknowledged PSN.
func TestLostNakRecoversByTimeout(t *testing.T) {
	f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 2, RateBps: 100e9})
	dst, db := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	droppedData, droppedNak := false, false
	var first rocev2.PSN
	started := false
	f.p.Tap = func(side int, pkt []byte, m verbs.TxMeta) {
		var p rocev2.Packet
		if p.Decode(pkt) != nil {
			return
		}
		if side == 0 && p.BTH.Opcode.IsWrite() {
			if !started {
				first, started = p.BTH.PSN, true
			}
			if p.BTH.PSN == first.Add(20) && !droppedData {
				droppedData = true
				pkt[len(pkt)-1] ^= 0xFF
			}
		}
		if side == 1 && p.BTH.Opcode == rocev2.OpAcknowledge && p.AETH.Syndrome == rocev2.SynNAKSequence && !droppedNak {
			droppedNak = true
			pkt[len(pkt)-1] ^= 0xFF
		}
	}
	start := f.p.Now
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	require.Equal(t, f.src.Bytes(), db)
	require.True(t, droppedNak)
	require.Equal(t, uint64(1), f.ca.Counters().Timeouts)
	require.Equal(t, uint64(1), f.cb.Counters().NaksSent)
	require.GreaterOrEqual(t, time.Duration(f.p.Now-start), rocev2.AckTimeout(8), "recovery waited for the ACK timeout")
}

// TestRetryExceeded: with the QP's path dead, the requester retries
// RetryCount times, one ACK timeout apart, then fails the head work request
// with StatusRetryExceeded and flushes the rest; the QP is in error.
func TestRetryExceeded(t *testing.T) {
	cfg := rocev2.Config{RetryCount: 3, AckTimeoutCode: 10}
	f := newFixture(t, cfg, memlink.Config{Seed: 3})
	dst, _ := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	f.p.Link.AddBlackout(memlink.Blackout{Entropy: f.ca.SourcePort(), AnyPlane: true, At: int64(f.p.Now)})
	start := f.p.Now
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 8<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 8<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	w1, w2 := f.wait(t, f.cqa), f.wait(t, f.cqa)
	require.Equal(t, uint64(1), w1.WRID)
	require.Equal(t, verbs.StatusRetryExceeded, w1.Status)
	require.Equal(t, uint64(2), w2.WRID)
	require.Equal(t, verbs.StatusFlushed, w2.Status)
	took := time.Duration(f.p.Now - start)
	to := rocev2.AckTimeout(10)
	require.GreaterOrEqual(t, took, 4*to)
	require.Less(t, took, 5*to)
	require.Equal(t, uint64(4), f.ca.Counters().Timeouts, "the first timeout and three retries")
	require.Equal(t, "error", f.ca.State())
	require.Equal(t, verbs.FailRetryExceeded, f.ca.FailReason())
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRSend}), rocev2.ErrQPError)
}

// TestLostReadResponseReRequestsTheRest: a lost READ response makes the
// requester re-issue the READ from the missing PSN; the responder executes
// the duplicate READ again.
func TestLostReadResponseReRequestsTheRest(t *testing.T) {
	f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 4})
	remote, rb := region(t, f.pb, 32<<10, verbs.AccessRemoteRead)
	for i := range rb {
		rb[i] = byte(i * 7)
	}
	local, lb := region(t, f.pa, 32<<10, verbs.AccessLocalWrite)
	count := 0
	var reqs []rocev2.Packet
	f.p.Tap = func(side int, pkt []byte, _ verbs.TxMeta) {
		p := decode(t, pkt)
		if side == 1 && p.BTH.Opcode.IsReadResponse() {
			count++
			if count == 5 {
				pkt[len(pkt)-1] ^= 0xFF
			}
		}
		if side == 0 && p.BTH.Opcode == rocev2.OpReadRequest {
			reqs = append(reqs, p)
		}
	}
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRRead, Local: local.SGE(0, 32<<10), RemoteAddr: remote.Addr(), RKey: remote.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	require.Equal(t, rb, lb)
	require.Len(t, reqs, 2)
	require.Equal(t, reqs[0].BTH.PSN.Add(4), reqs[1].BTH.PSN, "re-requested from the missing response's PSN")
	require.Equal(t, remote.Addr()+4*1024, reqs[1].RETH.VA)
	require.Equal(t, uint32(28<<10), reqs[1].RETH.DMALen)
	require.Equal(t, uint64(1), f.cb.Counters().DuplicateReads)
}

// TestDuplicatesAreAckedNotReExecuted: replayed WRITE and SEND packets are
// acknowledged again but change nothing.
func TestDuplicatesAreAckedNotReExecuted(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 5})
	target, tb := region(t, f.pb, 16<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	var captured [][]byte
	f.p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		if from == 0 && decode(t, pkt).BTH.Opcode.IsWrite() {
			captured = append(captured, append([]byte(nil), pkt...))
		}
	}
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 16<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	f.p.Tap = nil
	require.Equal(t, f.src.Bytes()[:16<<10], tb)
	for i := range tb {
		tb[i] = 0x11
	}
	acks := f.cb.Counters().AcksSent
	for _, pkt := range captured {
		f.eb.Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
	}
	f.p.Flush()
	for _, b := range tb {
		require.Equal(t, byte(0x11), b)
	}
	require.Len(t, captured, 4)
	require.Equal(t, uint64(len(captured)), f.cb.Counters().Duplicates)
	require.Greater(t, f.cb.Counters().AcksSent, acks, "duplicates are acknowledged again")
}

func TestRNRThenSuccess(t *testing.T) {
	f := newFixture(t, rocev2.Config{MinRNRTimer: 1}, memlink.Config{Seed: 6})
	buf, bb := region(t, f.pb, 4096, verbs.AccessLocalWrite)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
	require.NoError(t, f.p.RunUntil(func() bool { return f.ca.Counters().RNRNaksReceived >= 3 }, f.p.Now+1e9))
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 9, Local: buf.SGE(0, 4096)}))
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(9), rc.WRID)
	require.Equal(t, uint32(3000), rc.ByteLen)
	require.Equal(t, f.src.Bytes()[:3000], bb[:3000])
	require.GreaterOrEqual(t, f.cb.Counters().RNRNaksSent, uint64(3))
}

func TestRNRRetryExceeded(t *testing.T) {
	f := newFixture(t, rocev2.Config{MinRNRTimer: 1, RNRRetry: 2}, memlink.Config{Seed: 7})
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 3000)})
	w1, w2 := f.wait(t, f.cqa), f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusRNRRetryExceeded, w1.Status)
	require.Equal(t, verbs.StatusFlushed, w2.Status)
	require.Equal(t, uint64(3), f.ca.Counters().RNRNaksReceived, "the first RNR NAK and two retries")
	require.Equal(t, verbs.FailRNRRetryExceeded, f.ca.FailReason())
}
