package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestTxMetaECT: every packet the endpoint hands a backend asks to be sent
// ECN-capable (TxMeta.ECT, which the UDP and DPDK backends turn into
// ECT(0) in the IP header), as a RoCEv2 NIC sends them: CM, requests,
// ACKs; CNPs alone are Not-ECT. The receiver plays a marking switch so
// that CNPs are sent at all.
func TestTxMetaECT(t *testing.T) {
	cfg := rocev2.Config{LocalIP: rocev2.DefaultPeerIP(0)}
	ea, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	cfg.LocalIP, cfg.AcceptIncoming = rocev2.DefaultPeerIP(1), true
	eb, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	p := mempair.NewTransports(ea, ceMarking{eb, func(pkt []byte) bool {
		var pk rocev2.Packet
		return pk.Decode(pkt) == nil && pk.BTH.Opcode.IsWrite()
	}}, memlink.Config{Seed: 1, Delay: 2000, RateBps: 100e9})
	type key struct {
		op  rocev2.Opcode
		ect bool
	}
	seen := map[key]int{}
	p.Tap = func(_ int, pkt []byte, m verbs.TxMeta) {
		seen[key{rocev2.Opcode(pkt[0]), m.ECT}]++
	}
	ca, cb := connect(t, p, ea, eb)
	pa, pb := ea.AllocPD(), eb.AllocPD()
	cq := verbs.NewCompletionQueue(4)
	qa, err := ca.CreateQP(verbs.QPAttr{PD: pa, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	_, err = cb.CreateQP(verbs.QPAttr{PD: pb})
	require.NoError(t, err)
	const size = 1 << 20
	src, err := pa.RegisterMR(make([]byte, size), 0)
	require.NoError(t, err)
	dst, err := pb.RegisterMR(make([]byte, size), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, size), RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
	var wc [1]verbs.WorkCompletion
	require.NoError(t, p.RunUntil(func() bool { return cq.Poll(wc[:]) == 1 }, p.Now+10e9))
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)

	var ect, cnp int
	for k, n := range seen {
		if k.op == rocev2.OpCNP {
			require.False(t, k.ect, "CNP sent ECN-capable")
			cnp += n
			continue
		}
		require.True(t, k.ect, "%v sent Not-ECT (%d packets)", k.op, n)
		ect += n
	}
	require.Positive(t, cnp, "no CNP sent: the test did not mark")
	require.Positive(t, seen[key{rocev2.OpAcknowledge, true}], "no ACK seen")
	require.Positive(t, seen[key{rocev2.OpWriteFirst, true}], "no WRITE FIRST seen")
	t.Logf("%d packets ECT, %d CNPs Not-ECT", ect, cnp)
}
