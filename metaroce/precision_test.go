package metaroce_test

import (
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// packetCounter classifies packets seen by the pair's taps.
type packetCounter struct {
	sent, resent, delivered uint64
}

func isMsgPacket(pkt []byte) (data, retransmit bool) {
	var h mr.Header
	if h.Decode(pkt) != nil {
		return false, false
	}
	return h.Opcode.CarriesMsg(), h.Flags&mr.FlagRetransmit != 0
}

// transfer moves total bytes from A to B with WRITEs of size msg on one
// stream and returns what the taps counted.
func transfer(t *testing.T, cfg mr.Config, link memlink.Config, total, msg int) (packetCounter, *mempair.Pair) {
	p, err := mempair.New(cfg, cfg, link)
	require.NoError(t, err)
	var pc packetCounter
	p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		if d, re := isMsgPacket(pkt); d {
			pc.sent++
			if re {
				pc.resent++
			}
		}
	}
	p.RxTap = func(to int, pkt []byte) {
		if d, _ := isMsgPacket(pkt); d {
			pc.delivered++
		}
	}
	ca, cb, err := p.Connect(1e9)
	require.NoError(t, err)
	pa, pb := p.EP[0].AllocPD(), p.EP[1].AllocPD()
	cq := verbs.NewCompletionQueue(64)
	qa, err := ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq})
	require.NoError(t, err)
	_, err = cb.CreateQP(0, verbs.QPAttr{PD: pb})
	require.NoError(t, err)
	src := make([]byte, msg)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, msg)
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	md, err := pb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	posted, done := 0, 0
	wcs := make([]verbs.WorkCompletion, 16)
	err = p.RunUntil(func() bool {
		for posted < total/msg && posted-done < 8 {
			require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: uint64(posted), Opcode: verbs.WRWrite,
				Local: ms.SGE(0, msg), RemoteAddr: md.Addr(), RKey: md.RKey()}))
			posted++
		}
		n := cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
		}
		done += n
		return done == total/msg
	}, 100e9)
	require.NoError(t, err)
	require.Equal(t, src, dst)
	return pc, p
}

// TestRetransmissionPrecision: under random loss (no corruption, no
// reordering) the transport resends exactly what was lost — resent/lost at
// most 1.05 — because a SACK gap on a FIFO path is proof of loss and tail
// losses are found by NOP probes, never by blind resends.
func TestRetransmissionPrecision(t *testing.T) {
	for _, tc := range []struct {
		paths int
		loss  float64
	}{{1, 0.01}, {8, 0.01}, {8, 0.05}, {32, 0.10}, {4, 0.20}} {
		t.Run(fmt.Sprintf("paths=%d/loss=%.2f", tc.paths, tc.loss), func(t *testing.T) {
			cfg := mr.Config{Paths: tc.paths, MTU: 4096}
			link := memlink.Config{Seed: 7, Delay: 5000, RateBps: 100e9, Loss: tc.loss}
			pc, p := transfer(t, cfg, link, 64<<20, 1<<20)
			lost := pc.sent - pc.delivered
			require.Greater(t, lost, uint64(0), "no loss happened: the test would prove nothing")
			ratio := float64(pc.resent) / float64(lost)
			t.Logf("data packets sent=%d lost=%d resent=%d ratio=%.4f virtual time=%.3fms link=%s",
				pc.sent, lost, pc.resent, ratio, float64(p.Now)/1e6, p.Link.Stats())
			require.LessOrEqual(t, ratio, 1.05)
		})
	}
}
