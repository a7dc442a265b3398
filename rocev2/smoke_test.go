package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

func TestSmokeWriteSendRead(t *testing.T) {
	f := newFixture(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 1})
	require.Equal(t, f.ca.SourcePort(), f.cb.SourcePort())
	require.Equal(t, f.ca.QPN(), f.cb.RemoteQPN())
	dst, db := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 10000), RemoteAddr: dst.Addr() + 5, RKey: dst.RKey()})
	wc := f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusSuccess, wc.Status, wc)
	require.Equal(t, f.src.Bytes()[:10000], db[5:10005])

	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 7, Local: dst.SGE(20000, 5000)}))
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: f.src.SGE(100, 3000), Imm: 42})
	wc = f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusSuccess, wc.Status)
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(7), rc.WRID)
	require.Equal(t, uint32(3000), rc.ByteLen)
	require.True(t, rc.HasImm)
	require.Equal(t, uint32(42), rc.Imm)
	require.Equal(t, f.src.Bytes()[100:3100], db[20000:23000])

	local, lb := region(t, f.pa, 8000, verbs.AccessLocalWrite)
	f.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRRead, Local: local.SGE(0, 8000), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	wc = f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusSuccess, wc.Status, wc)
	require.Equal(t, db[:8000], lb)
}

// TestZeroLengthOperations: zero-byte WRITE, WRITE with immediate, SEND and
// READ each take one packet and complete; a zero-length RETH needs no
// valid rkey (IBA 9.4.1.1).
func TestZeroLengthOperations(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 2})
	local, _ := region(t, f.pa, 16, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 70}))
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 71}))
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, RemoteAddr: 12345, RKey: 99})
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRWriteImm, Imm: 7})
	f.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRSend})
	f.post(t, verbs.SendWR{ID: 4, Opcode: verbs.WRRead, Local: local.SGE(0, 0)})
	for id := uint64(1); id <= 4; id++ {
		wc := f.wait(t, f.cqa)
		require.Equal(t, id, wc.WRID)
		require.Equal(t, verbs.StatusSuccess, wc.Status, "wr %d", id)
		require.Zero(t, wc.ByteLen)
	}
	r1, r2 := f.wait(t, f.cqb), f.wait(t, f.cqb)
	require.Equal(t, verbs.WorkCompletion{WRID: 70, Opcode: 4, HasImm: true, Imm: 7, QPN: verbs.QPN(f.cb.QPN())}, r1)
	require.Equal(t, uint64(71), r2.WRID)
	require.Zero(t, r2.ByteLen)
}

// TestQPsAreSeparateConnections: several QPs between the same two hosts
// each get their own QP numbers and UDP source port (one path each).
func TestQPsAreSeparateConnections(t *testing.T) {
	p, ea, eb := pair(t, rocev2.Config{}, rocev2.Config{}, memlink.Config{Seed: 3, Delay: 1000})
	ports := map[uint16]bool{}
	for i := 0; i < 8; i++ {
		ca, cb := connect(t, p, ea, eb)
		require.Equal(t, ca.SourcePort(), cb.SourcePort())
		require.GreaterOrEqual(t, ca.SourcePort(), uint16(0xC000))
		ports[ca.SourcePort()] = true
	}
	require.Len(t, ports, 8)
	require.Equal(t, 8, ea.Connections())
	require.Equal(t, 8, eb.Connections())
}

// TestDeterministic: the same configuration and seed give the same run,
// packet for packet (no clock, no map-order dependence on the packet path).
func TestDeterministic(t *testing.T) {
	run := func() (float64, rocev2.ConnCounters) {
		return transfer(t, rocev2.Config{MTU: 1024}, memlink.Config{Seed: 9, Delay: 2000, RateBps: 100e9, Loss: 0.02, Reorder: 0.01, ReorderDelay: 5000}, 4<<20, 1<<20)
	}
	g1, a := run()
	g2, b := run()
	require.Equal(t, g1, g2)
	require.Equal(t, a, b)
	require.Greater(t, a.DataResent, uint64(0))
}
