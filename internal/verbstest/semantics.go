// Package verbstest holds the verbs-semantics tests every transport core
// must pass, written against the verbs interfaces only; each core's tests
// run them on a pair of its own devices (metaroce/semantics_test.go,
// rocev2/semantics_test.go), so the semantics are stated once.
package verbstest

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Devices builds two devices joined by a mempair: A (handle 0) dials, B
// (handle 1) accepts.
type Devices func(t *testing.T) (p *mempair.Pair, a, b verbs.Device)

// fixture is one session A->B with queue pair 0 at both ends.
type fixture struct {
	p        *mempair.Pair
	pa, pb   *verbs.ProtectionDomain
	cqa, cqb *verbs.CompletionQueue
	qa, qb   verbs.QP
}

func setup(t *testing.T, mk Devices) *fixture {
	t.Helper()
	p, a, b := mk(t)
	f := &fixture{p: p, pa: a.AllocPD(), pb: b.AllocPD(),
		cqa: verbs.NewCompletionQueue(16), cqb: verbs.NewCompletionQueue(16)}
	sa, err := a.Dial(p.Now, 1, 1)
	require.NoError(t, err)
	var sb verbs.Session
	require.NoError(t, p.RunUntil(func() bool {
		if sb == nil {
			sb, _ = b.Accept()
		}
		return sb != nil && sa.Established()
	}, p.Now+10e9))
	f.qa, err = sa.CreateQP(0, verbs.QPAttr{PD: f.pa, SendCQ: f.cqa, RecvCQ: f.cqa})
	require.NoError(t, err)
	f.qb, err = sb.CreateQP(0, verbs.QPAttr{PD: f.pb, SendCQ: f.cqb, RecvCQ: f.cqb})
	require.NoError(t, err)
	return f
}

// region registers n bytes filled with fill.
func region(t *testing.T, pd *verbs.ProtectionDomain, n int, fill func(i int) byte, access verbs.Access) (*verbs.MemoryRegion, []byte) {
	t.Helper()
	return Region(t, pd, n, fill, access)
}

func ee(i int) byte        { return EE(i) }
func pattern(i int) byte   { return byte(i*7 + 3) }
func eeBytes(n int) []byte { return bytes.Repeat([]byte{0xEE}, n) }

// wait runs until cq yields one completion and returns it.
func (f *fixture) wait(t *testing.T, cq *verbs.CompletionQueue) verbs.WorkCompletion {
	t.Helper()
	return WaitOne(t, f.p, cq, 60e9)
}

func (f *fixture) post(t *testing.T, wr verbs.SendWR) {
	t.Helper()
	require.NoError(t, f.qa.PostSend(f.p.Now, wr))
}

// Revoke: deregistering a region with I/O in flight revokes it (verbs
// semantics, see verbs.MemoryRegion.Deregister): the call succeeds at
// once, the work using the region fails, and nothing is placed into its
// memory afterwards. (The cores used to return busy, which fails here at
// the first Deregister.)
func Revoke(t *testing.T, mk Devices) {
	f := setup(t, mk)
	target, _ := region(t, f.pb, 64<<10, ee, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)

	src, _ := region(t, f.pa, 64<<10, pattern, 0)

	// A posted receive whose memory is deregistered before the SEND lands.
	recv, rb := region(t, f.pb, 4096, ee, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: recv.SGE(0, 4096)}))
	require.NoError(t, recv.Deregister())
	f.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRSend, Local: src.SGE(0, 3000)})
	wc := f.wait(t, f.cqb)
	require.Equal(t, uint64(2), wc.WRID)
	require.Equal(t, verbs.StatusLocalProtError, wc.Status)
	require.True(t, bytes.Equal(eeBytes(4096), rb), "nothing placed into the revoked receive buffer")
	f.wait(t, f.cqa)

	// A READ's destination, deregistered while the READ is in flight.
	dst, db := region(t, f.pa, 16<<10, ee, verbs.AccessLocalWrite)
	f.post(t, verbs.SendWR{ID: 4, Opcode: verbs.WRRead, Local: dst.SGE(0, 16<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.NoError(t, dst.Deregister())
	wc = f.wait(t, f.cqa)
	require.Equal(t, uint64(4), wc.WRID)
	require.Equal(t, verbs.StatusLocalProtError, wc.Status)
	require.True(t, bytes.Equal(eeBytes(16<<10), db), "nothing placed into the revoked READ destination")

	// A WRITE target deregistered while the WRITE is under way: the rest is
	// refused and nothing lands after the call.
	t2, t2b := region(t, f.pb, 64<<10, ee, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	f.post(t, verbs.SendWR{ID: 5, Opcode: verbs.WRWrite, Local: src.SGE(0, 64<<10), RemoteAddr: t2.Addr(), RKey: t2.RKey()})
	require.NoError(t, f.p.RunUntil(func() bool { return !bytes.Equal(eeBytes(len(t2b)), t2b) }, f.p.Now+10e9))
	require.NoError(t, t2.Deregister())
	snap := append([]byte(nil), t2b...)
	wc = f.wait(t, f.cqa)
	require.Equal(t, uint64(5), wc.WRID)
	require.Equal(t, verbs.StatusRemoteAccessError, wc.Status)
	require.True(t, bytes.Equal(snap, t2b), "nothing placed after Deregister returned")
	require.False(t, bytes.Equal(src.Bytes(), snap), "the WRITE had not finished when its target went")

	// A READ's source, deregistered while the responder is serving it: the
	// READ fails at the requester with a remote access error, as a new
	// READ under the dead key would, and nothing more is sent from the
	// region (no zeros in its place). On a fresh session: the remote
	// access error above ends a RoCEv2 queue pair.
	f = setup(t, mk)
	const readLen = 1 << 20
	rsrc, _ := region(t, f.pb, readLen, pattern, verbs.AccessRemoteRead)
	rdst, rdb := region(t, f.pa, readLen, ee, verbs.AccessLocalWrite)
	f.post(t, verbs.SendWR{ID: 6, Opcode: verbs.WRRead, Local: rdst.SGE(0, readLen), RemoteAddr: rsrc.Addr(), RKey: rsrc.RKey()})
	require.NoError(t, f.p.RunUntil(func() bool { return !bytes.Equal(eeBytes(readLen), rdb) }, f.p.Now+10e9))
	require.NoError(t, rsrc.Deregister())
	wc = f.wait(t, f.cqa)
	require.Equal(t, uint64(6), wc.WRID)
	require.Equal(t, verbs.StatusRemoteAccessError, wc.Status, "a READ whose source went mid-transfer fails")
	landed := landedFrom(t, rdb, pattern, "READ destination")
	require.Less(t, landed, readLen, "the READ had not finished when its source went")
	t.Logf("READ from a revoked source: %d of %d bytes had landed", landed, readLen)

	// The source of a WRITE, deregistered before any of it went out:
	// nothing is sent from it (no zeros in its place at the target), the
	// work request fails, and later posts naming the region are refused.
	// A fresh session again: the failure ends the queue pair.
	f = setup(t, mk)
	target, _ = region(t, f.pb, 64<<10, ee, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	src0, _ := region(t, f.pa, 64<<10, pattern, 0)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src0.SGE(0, 64<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.NoError(t, src0.Deregister())
	require.ErrorIs(t, src0.Deregister(), verbs.ErrRegionInvalid)
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{Opcode: verbs.WRSend, Local: src0.SGE(0, 10)}), verbs.ErrBadSGE,
		"a local SGE naming a deregistered region is refused at post time")
	wc = f.wait(t, f.cqa)
	require.Equal(t, uint64(1), wc.WRID)
	require.Equal(t, verbs.StatusLocalProtError, wc.Status)
	require.Equal(t, f.qa.QPN(), wc.QPN)
	f.settle()
	require.True(t, bytes.Equal(eeBytes(64<<10), target.Bytes()), "nothing sent from the revoked WRITE source")

	// The source of a SEND, deregistered while it is being sent: the rest
	// is not sent, the SEND fails, and the peer's receive never completes
	// as a success (it had data of the region only, never a stand-in).
	f = setup(t, mk)
	const sendLen = 1 << 20
	ssrc, _ := region(t, f.pa, sendLen, pattern, 0)
	srecv, srb := region(t, f.pb, sendLen, ee, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 8, Local: srecv.SGE(0, sendLen)}))
	f.post(t, verbs.SendWR{ID: 7, Opcode: verbs.WRSend, Local: ssrc.SGE(0, sendLen)})
	require.NoError(t, f.p.RunUntil(func() bool { return !bytes.Equal(eeBytes(sendLen), srb) }, f.p.Now+10e9))
	require.NoError(t, ssrc.Deregister())
	wc = f.wait(t, f.cqa)
	require.Equal(t, uint64(7), wc.WRID)
	require.Equal(t, verbs.StatusLocalProtError, wc.Status)
	f.settle()
	var wcs [4]verbs.WorkCompletion
	for _, wc := range wcs[:f.cqb.Poll(wcs[:])] {
		require.NotEqual(t, verbs.StatusSuccess, wc.Status, "the receive of a SEND cut short does not succeed: %+v", wc)
	}
	landed = landedFrom(t, srb, pattern, "receive buffer")
	require.Less(t, landed, sendLen, "the SEND had not finished when its source went")
	t.Logf("SEND from a revoked source: %d of %d bytes had landed", landed, sendLen)
}

// landedFrom checks that every byte of b that changed from 0xEE is the
// source's own (src), never a stand-in for it, and counts them.
func landedFrom(t *testing.T, b []byte, src func(i int) byte, what string) int {
	t.Helper()
	n := 0
	for i, x := range b {
		if x != 0xEE {
			require.Equal(t, src(i), x, "%s byte %d: only the source's own bytes, never a stand-in", what, i)
			n++
		}
	}
	return n
}

// settle runs the pair for another virtual second, or until nothing is
// left to happen.
func (f *fixture) settle() {
	_ = f.p.RunUntil(func() bool { return false }, f.p.Now+1e9)
}

// DestroyOne: destroying one queue pair of a session (verbs.QP.Destroy)
// flushes that queue pair's own work and refuses new posts on it, while
// the session's other queue pair keeps working both ways.
func DestroyOne(t *testing.T, mk Devices) {
	p, a, b := mk(t)
	pa, pb := a.AllocPD(), b.AllocPD()
	sa, err := a.Dial(p.Now, 1, 2)
	require.NoError(t, err)
	var accepted []verbs.Session
	room := func() int {
		k := 0
		for _, s := range accepted {
			k += s.MaxQPs()
		}
		return k
	}
	require.NoError(t, p.RunUntil(func() bool {
		for room() < 2 {
			s, ok := b.Accept()
			if !ok {
				break
			}
			accepted = append(accepted, s)
		}
		return room() >= 2 && sa.Established()
	}, p.Now+10e9))
	var qa, qb [2]verbs.QP
	var cqa, cqb [2]*verbs.CompletionQueue
	for i := range 2 {
		cqa[i], cqb[i] = verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
		qa[i], err = sa.CreateQP(i, verbs.QPAttr{PD: pa, SendCQ: cqa[i], RecvCQ: cqa[i]})
		require.NoError(t, err)
	}
	k := 0
	for _, s := range accepted {
		for i := 0; i < s.MaxQPs() && k < 2; i++ {
			qb[k], err = s.CreateQP(i, verbs.QPAttr{PD: pb, SendCQ: cqb[k], RecvCQ: cqb[k]})
			require.NoError(t, err)
			k++
		}
	}
	f := &fixture{p: p}
	src, _ := region(t, pa, 4096, pattern, 0)
	dst, db := region(t, pb, 4096, ee, verbs.AccessLocalWrite)

	require.NoError(t, qb[0].PostRecv(p.Now, verbs.RecvWR{ID: 40}))
	require.NoError(t, qb[0].Destroy(p.Now))
	require.ErrorIs(t, qb[0].Destroy(p.Now), verbs.ErrQPDestroyed)
	wc := f.wait(t, cqb[0])
	require.Equal(t, uint64(40), wc.WRID)
	require.Equal(t, verbs.StatusFlushed, wc.Status, "the destroyed queue pair's own receive is flushed")
	require.Equal(t, qb[0].QPN(), wc.QPN)
	// A receive no message reached is still reported as a receive: the
	// verbs library tells send and receive completions apart by it.
	require.Equal(t, verbs.WCRecv, wc.Opcode)
	require.ErrorIs(t, qb[0].PostRecv(p.Now, verbs.RecvWR{ID: 41}), verbs.ErrQPDestroyed)
	require.ErrorIs(t, qb[0].PostSend(p.Now, verbs.SendWR{ID: 42, Opcode: verbs.WRSend}), verbs.ErrQPDestroyed)

	// The other queue pair carries on, both ways.
	require.NoError(t, qb[1].PostRecv(p.Now, verbs.RecvWR{ID: 7, Local: dst.SGE(0, 4096)}))
	require.NoError(t, qa[1].PostSend(p.Now, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: src.SGE(0, 3000), Imm: 9}))
	require.Equal(t, verbs.WorkCompletion{WRID: 2, Status: verbs.StatusSuccess, Opcode: verbs.WCSend, ByteLen: 3000, QPN: qa[1].QPN()},
		f.wait(t, cqa[1]))
	require.Equal(t, verbs.WorkCompletion{WRID: 7, Status: verbs.StatusSuccess, Opcode: verbs.WCRecv, ByteLen: 3000, Imm: 9, HasImm: true, QPN: qb[1].QPN()},
		f.wait(t, cqb[1]))
	require.True(t, bytes.Equal(src.Bytes()[:3000], db[:3000]))
	back, _ := region(t, pa, 4096, ee, verbs.AccessLocalWrite)
	require.NoError(t, qa[1].PostRecv(p.Now, verbs.RecvWR{ID: 8, Local: back.SGE(0, 4096)}))
	require.NoError(t, qb[1].PostSend(p.Now, verbs.SendWR{ID: 3, Opcode: verbs.WRSendImm, Local: dst.SGE(0, 100), Imm: 10}))
	require.Equal(t, verbs.StatusSuccess, f.wait(t, cqb[1]).Status)
	require.Equal(t, verbs.StatusSuccess, f.wait(t, cqa[1]).Status)
}
