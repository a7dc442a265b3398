package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Destroying one queue pair (ibv_destroy_qp) closes its own connection and
// nothing else: another QP between the same endpoints keeps working.
func TestDestroyOneQPKeepsTheOthers(t *testing.T) {
	f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 29})
	ca2, cb2 := connect(t, f.p, f.ea, f.eb)
	cqa2, cqb2 := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	qa2, err := ca2.CreateQP(verbs.QPAttr{PD: f.pa, SendCQ: cqa2, RecvCQ: cqa2})
	require.NoError(t, err)
	qb2, err := cb2.CreateQP(verbs.QPAttr{PD: f.pb, SendCQ: cqb2, RecvCQ: cqb2})
	require.NoError(t, err)

	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 40}))
	require.NoError(t, f.qb.Destroy(f.p.Now))
	require.ErrorIs(t, f.qb.Destroy(f.p.Now), verbs.ErrQPDestroyed)
	wc := f.wait(t, f.cqb)
	require.Equal(t, verbs.WorkCompletion{WRID: 40, Status: verbs.StatusFlushed, Opcode: verbs.WCRecv, QPN: f.qb.QPN()}, wc)
	require.ErrorIs(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 41}), verbs.ErrQPDestroyed)

	dst, db := region(t, f.pb, 4096, verbs.AccessLocalWrite)
	require.NoError(t, qb2.PostRecv(f.p.Now, verbs.RecvWR{ID: 7, Local: dst.SGE(0, 4096)}))
	require.NoError(t, qa2.PostSend(f.p.Now, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: f.src.SGE(0, 3000), Imm: 9}))
	require.Equal(t, verbs.StatusSuccess, f.wait(t, cqa2).Status)
	got := f.wait(t, cqb2)
	require.Equal(t, verbs.StatusSuccess, got.Status)
	require.Equal(t, qb2.QPN(), got.QPN)
	require.Equal(t, f.src.Bytes()[:3000], db[:3000])
	require.True(t, ca2.Established())
	require.True(t, cb2.Established())
}
