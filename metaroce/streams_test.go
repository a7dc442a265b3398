package metaroce_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestStalledStreamDoesNotDelayOthers: a SEND waiting for a receive (RNR
// back-off) holds its own stream only; WRITEs on another stream of the same
// connection complete meanwhile.
func TestStalledStreamDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t, mr.Config{RNRRetries: 20, RNRBackoff: 50 * time.Microsecond}, memlink.Config{Seed: 21, Loss: 0.01})
	target, tb := region(t, f.pb, 1<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	qa1, err := f.ca.CreateQP(1, verbs.QPAttr{PD: f.pa, SendCQ: f.cqa})
	require.NoError(t, err)
	_, err = f.cb.CreateQP(1, verbs.QPAttr{PD: f.pb})
	require.NoError(t, err)

	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 1000)}) // stream 0: no receive yet
	for i := 0; i < 16; i++ {
		require.NoError(t, qa1.PostSend(f.p.Now, verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.WRWrite,
			Local: f.src.SGE(0, 64<<10), RemoteAddr: target.Addr() + uint64(i)*64<<10, RKey: target.RKey()}))
	}
	for i := 0; i < 16; i++ {
		wc := f.wait(t, f.cqa)
		require.Equal(t, uint64(100+i), wc.WRID, "stream 1 completes in order, ahead of the stalled stream 0")
		require.Equal(t, verbs.StatusSuccess, wc.Status)
	}
	require.Equal(t, 1, f.qa.OutstandingSends(), "the SEND on stream 0 is still waiting")
	for i := 0; i < 16; i++ {
		require.Equal(t, f.src.Bytes()[:64<<10], tb[i*64<<10:(i+1)*64<<10])
	}
	dst, db := region(t, f.pb, 1000, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 1000)}))
	wc := f.wait(t, f.cqa)
	require.Equal(t, uint64(1), wc.WRID)
	require.Equal(t, verbs.StatusSuccess, wc.Status)
	require.Equal(t, f.src.Bytes()[:1000], db)
}

// TestManyStreamsSharePaths: streams are cheap records over the same paths.
func TestManyStreamsSharePaths(t *testing.T) {
	f := newFixture(t, mr.Config{Paths: 4, Streams: 4096}, memlink.Config{Seed: 22, Loss: 0.02})
	target, tb := region(t, f.pb, 4096*64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	qs := make([]*mr.QueuePair, 4096)
	for i := 1; i < len(qs); i++ {
		var err error
		qs[i], err = f.ca.CreateQP(mr.StreamID(i), verbs.QPAttr{PD: f.pa, SendCQ: f.cqa})
		require.NoError(t, err)
		_, err = f.cb.CreateQP(mr.StreamID(i), verbs.QPAttr{PD: f.pb})
		require.NoError(t, err)
	}
	qs[0] = f.qa
	for i, q := range qs {
		require.NoError(t, q.PostSend(f.p.Now, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Local: f.src.SGE(i%1000, 64),
			RemoteAddr: target.Addr() + uint64(i)*64, RKey: target.RKey()}))
	}
	seen := make(map[uint64]bool)
	for len(seen) < len(qs) {
		wc := f.wait(t, f.cqa)
		require.Equal(t, verbs.StatusSuccess, wc.Status)
		require.False(t, seen[wc.WRID])
		seen[wc.WRID] = true
	}
	for i := range qs {
		require.Equal(t, f.src.Bytes()[i%1000:i%1000+64], tb[i*64:(i+1)*64])
	}
	require.Equal(t, 4, f.ca.NumPaths(), "streams add no paths")
}

// TestReconnectAfterRestartFailsOldConnection: when a peer comes back with
// a new incarnation and connects again, the connection to its previous
// life fails and its outstanding work completes with errors.
func TestReconnectAfterRestartFailsOldConnection(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 23})
	recv, _ := region(t, f.pb, 128, verbs.AccessLocalWrite)
	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 77, Local: recv.SGE(0, 128)}))
	// A restarts: same node id, new incarnation, and connects again.
	na, err := mr.NewEndpoint(mr.Config{Paths: 4, Node: 1, Incarnation: 1234})
	require.NoError(t, err)
	f.p.Replace(0, na)
	nc, err := na.Connect(f.p.Now, 1)
	require.NoError(t, err)
	// Its first packet on the new connection proves the new incarnation
	// is there (a CONNECT alone fails nothing: admission.go).
	npd := na.AllocPD()
	ncq := verbs.NewCompletionQueue(4)
	nq, err := nc.CreateQP(0, verbs.QPAttr{PD: npd, SendCQ: ncq, RecvCQ: ncq})
	require.NoError(t, err)
	nsrc, err := npd.RegisterMR(make([]byte, 8), 0)
	require.NoError(t, err)
	require.NoError(t, nq.PostSend(f.p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: nsrc.SGE(0, 8)}))
	rc := f.wait(t, f.cqb)
	require.Equal(t, uint64(77), rc.WRID)
	require.Equal(t, verbs.StatusFlushed, rc.Status)
	require.Equal(t, "failed", f.cb.State())
	require.Equal(t, uint64(1), f.p.EP[1].Counters().PeerRestarts, "%v", f.cb.FailReason())
	require.Equal(t, verbs.FailPeerRestart, f.cb.FailReason())
	require.NoError(t, f.p.RunUntil(nc.Established, f.p.Now+1e9))
}

// TestNewPacketsRotatePlanes: an endpoint hands new data packets to the
// planes in turn across all its connections, so its NIC ports are fed
// evenly. Left to each connection's own picker, connections that start
// together move in step (all on plane 0, then all on plane 1, ...), and
// one NIC port backs up while the others idle.
func TestNewPacketsRotatePlanes(t *testing.T) {
	cfg := mr.Config{Paths: 16, Planes: 4}
	p, err := mempair.New(cfg, cfg, memlink.Config{Seed: 24, Delay: 2000})
	require.NoError(t, err)
	pa, pb := p.EP[0].AllocPD(), p.EP[1].AllocPD()
	src, err := pa.RegisterMR(make([]byte, 64<<10), 0)
	require.NoError(t, err)
	cq := verbs.NewCompletionQueue(16)
	var qps []*mr.QueuePair
	var targets []*verbs.MemoryRegion
	for i := 0; i < 8; i++ {
		ca, cb, err := p.Connect(p.Now + 1e9)
		require.NoError(t, err)
		q, err := ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq})
		require.NoError(t, err)
		_, err = cb.CreateQP(0, verbs.QPAttr{PD: pb})
		require.NoError(t, err)
		tgt, err := pb.RegisterMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		qps, targets = append(qps, q), append(targets, tgt)
	}
	var planes []verbs.PlaneID
	p.Tap = func(from int, pkt []byte, meta verbs.TxMeta) {
		var h mr.Header
		if from == 0 && h.Decode(pkt) == nil && h.Opcode == mr.OpWrite && h.Flags&mr.FlagRetransmit == 0 {
			planes = append(planes, meta.Plane)
		}
	}
	for i, q := range qps {
		require.NoError(t, q.PostSend(p.Now, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Local: src.SGE(0, 64<<10),
			RemoteAddr: targets[i].Addr(), RKey: targets[i].RKey()}))
	}
	wcs := make([]verbs.WorkCompletion, 8)
	done := 0
	require.NoError(t, p.RunUntil(func() bool { done += cq.Poll(wcs); return done == len(qps) }, p.Now+1e9))
	require.Len(t, planes, 8*16)
	for i := 1; i < len(planes); i++ {
		require.Equal(t, (planes[i-1]+1)%4, planes[i], "packet %d: plane sequence %v", i, planes)
	}
}
