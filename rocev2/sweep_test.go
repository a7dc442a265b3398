package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// transfer WRITEs total bytes A->B as msg-sized WRITEs, at most 8
// outstanding (metaroce/precision_test.go's harness), and returns the
// goodput in Gb/s of virtual time and the requester's counters.
func transfer(t *testing.T, cfg rocev2.Config, link memlink.Config, total, msg int) (float64, rocev2.ConnCounters) {
	t.Helper()
	f := newFixture(t, cfg, link)
	src := make([]byte, msg)
	for i := range src {
		src[i] = byte(i*17 + 5)
	}
	ms, err := f.pa.RegisterMR(src, 0)
	require.NoError(t, err)
	md, err := f.pb.RegisterMR(make([]byte, msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	posted, done := 0, 0
	wcs := make([]verbs.WorkCompletion, 16)
	start := f.p.Now
	err = f.p.RunUntil(func() bool {
		for posted < total/msg && posted-done < 8 {
			require.NoError(t, f.qa.PostSend(f.p.Now, verbs.SendWR{ID: uint64(posted), Opcode: verbs.WRWrite,
				Local: ms.SGE(0, msg), RemoteAddr: md.Addr(), RKey: md.RKey()}))
			posted++
		}
		n := f.cqa.Poll(wcs)
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
		}
		done += n
		return done == total/msg
	}, f.p.Now+100e9)
	require.NoError(t, err)
	require.Equal(t, src, md.Bytes())
	secs := float64(f.p.Now-start) / 1e9
	return float64(total) * 8 / secs / 1e9, *f.ca.Counters()
}

// TestLossSweep measures the goodput (in virtual time) of a 64 MiB WRITE
// transfer over a 100 Gb/s, 2 µs memlink at several random loss rates,
// with the default local ACK timeout (code 8, 1.05 ms) and a tuned one
// (code 4, 65.5 µs), and logs it (go test -v -run LossSweep). Runs are
// deterministic; the checks are loose: near line rate without loss, less
// with more loss, never better with the longer timeout.
func TestLossSweep(t *testing.T) {
	losses := []float64{0, 0.001, 0.01, 0.05, 0.10}
	if testing.Short() {
		losses = losses[:3]
	}
	got := map[uint8][]float64{}
	for _, code := range []uint8{8, 4} {
		for _, loss := range losses {
			cfg := rocev2.Config{MTU: 4096, AckTimeoutCode: code}
			link := memlink.Config{Seed: 7, Delay: 2000, RateBps: 100e9, Loss: loss}
			gbps, c := transfer(t, cfg, link, 64<<20, 1<<20)
			t.Logf("ack timeout code %d, loss %5.1f%%: %6.2f Gb/s  (data sent %d, resent %d, NAKs %d, timeouts %d)",
				code, loss*100, gbps, c.DataPacketsSent, c.DataResent, c.NaksReceived, c.Timeouts)
			got[code] = append(got[code], gbps)
		}
	}
	for _, code := range []uint8{8, 4} {
		g := got[code]
		require.Greater(t, g[0], 95.0, "no loss: near the 100 Gb/s line rate")
		for i := 1; i < len(g); i++ {
			require.Less(t, g[i], g[i-1], "more loss, less goodput (code %d)", code)
			require.GreaterOrEqual(t, got[4][i], got[8][i])
		}
	}
}
