package rocev2

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestPSNWrapWithLoss moves a QP's PSNs just below 2^24 and runs WRITEs and
// a READ across the wrap, with one packet lost right after it: the NAK,
// the go-back-N and the completions work across the wrap.
func TestPSNWrapWithLoss(t *testing.T) {
	d := newDirectPair(t, Config{MTU: 256})
	start := PSN(PSNMask - 5)
	d.ca.nextPSN, d.ca.una, d.ca.sndPSN, d.ca.sndMax = start, start, start, start
	d.cb.epsn = start
	src, _ := d.qa.pd.RegisterMR(bytes.Repeat([]byte{0x5A}, 8192), verbs.AccessLocalWrite)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 11)
	}
	dst, _ := d.qb.pd.RegisterMR(make([]byte, 8192), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	dropped := false
	var naks []PSN
	d.tap = func(from int, pkt []byte) {
		var p Packet
		if p.Decode(pkt) != nil {
			return
		}
		if from == 0 && p.BTH.PSN == 2 && !dropped {
			dropped = true
			pkt[len(pkt)-1] ^= 1
		}
		if from == 1 && p.BTH.Opcode == OpAcknowledge && p.AETH.Syndrome == SynNAKSequence {
			naks = append(naks, p.BTH.PSN)
		}
	}
	require.NoError(t, d.qa.PostSend(d.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, 4096), RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
	require.NoError(t, d.qa.PostSend(d.now, verbs.SendWR{ID: 2, Opcode: verbs.WRRead, Local: src.SGE(4096, 2000), RemoteAddr: dst.Addr() + 100, RKey: dst.RKey()}))
	var wcs [4]verbs.WorkCompletion
	got := 0
	for i := 0; i < 1000 && got < 2; i++ {
		d.pump()
		got += d.cqa.Poll(wcs[got:])
	}
	require.Equal(t, 2, got)
	require.Equal(t, verbs.StatusSuccess, wcs[0].Status)
	require.Equal(t, verbs.StatusSuccess, wcs[1].Status)
	require.True(t, dropped)
	require.Equal(t, []PSN{2}, naks, "the NAK names the first PSN after the wrap that went missing")
	require.Equal(t, src.Bytes()[:4096], dst.Bytes()[:4096])
	require.Equal(t, dst.Bytes()[100:2100], src.Bytes()[4096:6096])
	require.Equal(t, start.Add(16+8), d.cb.epsn, "16 WRITE packets and 8 READ responses, across 2^24")
}
