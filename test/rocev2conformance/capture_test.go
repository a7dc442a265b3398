package rocev2conformance

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/engine/pcap"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestRNRNakConformance checks the one packet kind the simulator's capture
// (TestSimCaptureConformance) cannot hold: the RNR NAK (AETH syndrome
// 0x20), which a responder sends when a SEND finds no receive posted — the
// simulator's applications always keep receives posted. A scripted
// exchange over the in-memory pair produces it: the CM handshake, a
// three-packet SEND with immediate before any receive (RNR NAK), the
// receive, the SEND again and its ACK. The frames are written as a pcap
// and checked like the simulator's capture (checkCapture).
func TestRNRNakConformance(t *testing.T) {
	tshark := requireTools(t)
	frames := rnrExchange(t)
	path := filepath.Join(t.TempDir(), "rnr.pcap")
	writePcap(t, path, frames)
	got, kinds := checkCapture(t, tshark, path)
	require.Len(t, got, len(frames))
	for i := range got {
		require.Equal(t, frames[i].payload, got[i].payload, "frame %d as written", i+1)
	}
	for _, k := range []string{"UD SEND Only", "SEND First", "SEND Middle", "SEND Last with Immediate", "Acknowledge 0x20", "Acknowledge 0x0"} {
		require.Positive(t, kinds[k], "the capture has no %s (kinds: %v)", k, kinds)
	}
	t.Logf("%d frames: tshark decodes all as RRoCE, scapy agrees on every ICRC; kinds %v", len(frames), kinds)
}

// frame is one packet as a sender emitted it.
type frame struct {
	ts      verbs.Time
	from    int
	meta    verbs.TxMeta
	payload []byte
}

// rnrExchange runs the RNR NAK exchange between two endpoints over
// mempair and returns the frames as sent, before the link.
func rnrExchange(t *testing.T) []frame {
	t.Helper()
	ips := [2]rocev2.IPv4{rocev2.DefaultPeerIP(0), rocev2.DefaultPeerIP(1)}
	cfg := rocev2.Config{MTU: 1024, MinRNRTimer: 1, LocalIP: ips[0]}
	ea, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	cfg.LocalIP, cfg.AcceptIncoming = ips[1], true
	eb, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)

	p := mempair.NewTransports(ea, eb, memlink.Config{Seed: 1, Delay: 2000, RateBps: 100e9})
	var frames []frame
	p.Tap = func(from int, pkt []byte, m verbs.TxMeta) {
		frames = append(frames, frame{ts: p.Now, from: from, meta: m, payload: append([]byte(nil), pkt...)})
	}

	ca, err := ea.Connect(p.Now, 1)
	require.NoError(t, err)
	var cb *rocev2.Conn
	require.NoError(t, p.RunUntil(func() bool {
		if cb == nil {
			cb, _ = eb.Accept()
		}
		return cb != nil && ca.Established() && cb.Established()
	}, 1e9))
	pa, pb := ea.AllocPD(), eb.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	qa, err := ca.CreateQP(verbs.QPAttr{PD: pa, SendCQ: cqa})
	require.NoError(t, err)
	qb, err := cb.CreateQP(verbs.QPAttr{PD: pb, RecvCQ: cqb})
	require.NoError(t, err)
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	dst, err := pb.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite)
	require.NoError(t, err)

	// A SEND before its receive: RNR NAK, then the retry once the
	// receive is there.
	require.NoError(t, qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRSendImm, Local: ms.SGE(0, 2100), Imm: 0xABCD}))
	require.NoError(t, p.RunUntil(func() bool { return ca.Counters().RNRNaksReceived > 0 }, p.Now+1e9))
	require.NoError(t, qb.PostRecv(p.Now, verbs.RecvWR{ID: 1, Local: dst.SGE(0, 4096)}))
	var wc [4]verbs.WorkCompletion
	require.NoError(t, p.RunUntil(func() bool {
		k := cqa.Poll(wc[:])
		for _, w := range wc[:k] {
			require.Equal(t, verbs.StatusSuccess, w.Status, "%+v", w)
		}
		cqb.Poll(wc[:])
		return k > 0
	}, p.Now+1e9))
	require.NoError(t, p.RunUntil(func() bool { return p.Link.InFlight() == 0 }, p.Now+1e9))
	return frames
}

// writePcap writes the frames as Ethernet/IPv4/UDP: A is 10.0.0.1, B
// 10.0.0.2, UDP destination port 4791, DSCP and ECN as a RoCEv2 NIC sets
// them (rocev2.TrafficClass).
func writePcap(t *testing.T, path string, frames []frame) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	bw := bufio.NewWriter(f)
	w, err := pcap.NewWriter(bw)
	require.NoError(t, err)
	ips := [2][4]byte{rocev2.DefaultPeerIP(0), rocev2.DefaultPeerIP(1)}
	for _, fr := range frames {
		h := pcap.Frame{SrcIP: ips[fr.from], DstIP: ips[1-fr.from], SrcPort: uint16(fr.meta.Entropy), DstPort: rocev2.UDPPort}
		h.SrcMAC, h.DstMAC = pcap.MACFromIPv4(h.SrcIP), pcap.MACFromIPv4(h.DstIP)
		h.DSCP, h.ECN = rocev2.TrafficClass(fr.payload)
		require.NoError(t, w.WriteUDP(int64(fr.ts), h, fr.payload))
	}
	require.NoError(t, bw.Flush())
}
