package rocev2_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// ceMarking delivers packets to an endpoint with the IP ECN field set to
// Congestion Experienced when mark says so: memlink has no queues to mark,
// so tests play the congested switch.
type ceMarking struct {
	*rocev2.Endpoint
	mark func(pkt []byte) bool
}

func (c ceMarking) Receive(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	rx.CE = c.mark(pkt)
	c.Endpoint.Receive(now, pkt, rx)
}

// TestDCQCNEndToEnd: with every data packet CE-marked at the receiver, the
// notification point sends at most one CNP per 50 µs, the sender's rate is
// cut and its packets are paced further apart than at line rate; the
// transfer still completes intact.
func TestDCQCNEndToEnd(t *testing.T) {
	// ConnectX defaults: alpha is refreshed every microsecond, so a CNP per
	// 50 µs keeps it small and each cut gentle; the byte counter (32 KB)
	// recovers fast. The rate still drops measurably.
	t.Run("ConnectX defaults", func(t *testing.T) { dcqcnEndToEnd(t, rocev2.DCQCNConfig{}, 1.05) })
	// The paper's timescales (alpha and increase timers 55 µs, 10 MB byte
	// counter, F = 5, R_AI = 40 Mb/s, g = 1/256) cut much harder.
	t.Run("paper timescales", func(t *testing.T) {
		dcqcnEndToEnd(t, rocev2.DCQCNConfig{G: 1.0 / 256, AlphaUpdatePeriod: 55 * time.Microsecond, TimeReset: 55 * time.Microsecond,
			ByteReset: 10 << 20, Threshold: 5, AIRateBps: 40e6, InitialAlpha: 1}, 1.5)
	})
}

func dcqcnEndToEnd(t *testing.T, dc rocev2.DCQCNConfig, slower float64) {
	cfg := rocev2.Config{LocalIP: rocev2.DefaultPeerIP(0), DCQCN: dc}
	ea, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	cfg.LocalIP, cfg.AcceptIncoming = rocev2.DefaultPeerIP(1), true
	eb, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	marking := false
	p := mempair.NewTransports(ea, ceMarking{eb, func(pkt []byte) bool {
		var pk rocev2.Packet
		return marking && pk.Decode(pkt) == nil && pk.BTH.Opcode.IsWrite()
	}}, memlink.Config{Seed: 1, Delay: 2000, RateBps: 100e9})
	ca, cb := connect(t, p, ea, eb)
	pa, pb := ea.AllocPD(), eb.AllocPD()
	cq := verbs.NewCompletionQueue(4)
	qa, err := ca.CreateQP(verbs.QPAttr{PD: pa, SendCQ: cq})
	require.NoError(t, err)
	_, err = cb.CreateQP(verbs.QPAttr{PD: pb})
	require.NoError(t, err)
	const size = 8 << 20
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 3)
	}
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	dst, err := pb.RegisterMR(make([]byte, size), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)

	var sendTimes []verbs.Time
	p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		var pk rocev2.Packet
		if from == 0 && pk.Decode(pkt) == nil && pk.BTH.Opcode.IsWrite() {
			sendTimes = append(sendTimes, p.Now)
		}
	}
	run := func() time.Duration {
		start := p.Now
		require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, size), RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
		var wc [1]verbs.WorkCompletion
		require.NoError(t, p.RunUntil(func() bool { return cq.Poll(wc[:]) == 1 }, p.Now+10e9))
		require.Equal(t, verbs.StatusSuccess, wc[0].Status)
		return time.Duration(p.Now - start)
	}

	// Unmarked: line rate, no CNPs.
	clean := run()
	require.Zero(t, cb.Counters().CNPsSent)
	require.False(t, ca.RateLimited())
	lineGap := float64(4096+rocev2.BTHLen+rocev2.ICRCLen+46) * 8 / 100e9 * 1e9
	require.InDelta(t, lineGap, float64(sendTimes[len(sendTimes)-1]-sendTimes[0])/float64(len(sendTimes)-1), lineGap*0.05)

	// Marked: CNPs, cuts, pacing.
	sendTimes = sendTimes[:0]
	marking = true
	marked := run()
	require.Equal(t, dst.Bytes(), src)
	np, rp := cb.Counters(), ca.Counters()
	require.Greater(t, np.CNPsSent, uint64(1))
	require.LessOrEqual(t, np.CNPsSent, uint64(marked/(50*time.Microsecond))+1, "at most one CNP per QP per 50 µs")
	require.Equal(t, np.CNPsSent, rp.CNPsReceived)
	require.Greater(t, rp.RateCuts, uint64(1))
	require.True(t, ca.RateLimited())
	require.Less(t, ca.Rate(p.Now), 100e9)
	meanGap := float64(sendTimes[len(sendTimes)-1]-sendTimes[0]) / float64(len(sendTimes)-1)
	require.Greater(t, meanGap, slower*lineGap, "paced below line rate")
	require.Greater(t, float64(marked), float64(clean)*slower)
	t.Logf("clean %v, marked %v: %d CNPs, %d cuts, final rate %.2f Gb/s, mean gap %.0f ns (line %.0f ns)",
		clean, marked, np.CNPsSent, rp.RateCuts, ca.Rate(p.Now)/1e9, meanGap, lineGap)
}
