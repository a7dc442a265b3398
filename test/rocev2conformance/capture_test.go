package rocev2conformance

import (
	"bufio"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/engine/pcap"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/rocev2"
)

// ceMarking delivers packets with ECN CE set when mark says so (the
// congested switch memlink does not model).
type ceMarking struct {
	*rocev2.Endpoint
	mark func(pkt []byte) bool
}

func (c ceMarking) Receive(now metaroce.Time, pkt []byte, rx metaroce.RxMeta) {
	rx.CE = c.mark(pkt)
	c.Endpoint.Receive(now, pkt, rx)
}

// frame is one packet as a sender emitted it.
type frame struct {
	ts      metaroce.Time
	from    int
	meta    metaroce.TxMeta
	payload []byte
	ce      bool
}

// capture runs a RoCEv2 exchange between two endpoints over mempair that
// produces every packet kind this transport sends: CM (REQ, REP, RTU),
// WRITE First/Middle/Last/Only (with and without immediate), SEND
// First/Middle/Last/Only (with and without immediate), READ request and
// responses (First/Middle/Last/Only), ACK, NAK (a WRITE packet is lost),
// RNR NAK (a SEND before its receive) and CNP (CE-marked packets). It
// returns the frames as sent, before the link.
func capture(t *testing.T) []frame {
	t.Helper()
	ips := [2]rocev2.IPv4{rocev2.DefaultPeerIP(0), rocev2.DefaultPeerIP(1)}
	cfg := rocev2.Config{MTU: 1024, MinRNRTimer: 1, LocalIP: ips[0]}
	ea, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)
	cfg.LocalIP, cfg.AcceptIncoming = ips[1], true
	eb, err := rocev2.NewEndpoint(cfg)
	require.NoError(t, err)

	marking := false
	isWrite := func(pkt []byte) bool {
		var p rocev2.Packet
		return p.Decode(pkt) == nil && p.BTH.Opcode.IsWrite()
	}
	p := mempair.NewTransports(ea, ceMarking{eb, func(pkt []byte) bool { return marking && isWrite(pkt) }},
		memlink.Config{Seed: 1, Delay: 2000, RateBps: 100e9})
	var frames []frame
	dropNext := false
	p.Tap = func(from int, pkt []byte, m metaroce.TxMeta) {
		frames = append(frames, frame{ts: p.Now, from: from, meta: m, payload: append([]byte(nil), pkt...),
			ce: from == 0 && marking && isWrite(pkt)})
		var pk rocev2.Packet
		if dropNext && from == 0 && pk.Decode(pkt) == nil && pk.BTH.Opcode == rocev2.OpWriteMiddle {
			dropNext = false
			pkt[len(pkt)-1] ^= 0xFF // lost on the way: the responder NAKs the gap
		}
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
	cqa, cqb := rocev2.NewCompletionQueue(16), rocev2.NewCompletionQueue(16)
	qa, err := ca.CreateQP(rocev2.QPAttr{PD: pa, SendCQ: cqa})
	require.NoError(t, err)
	qb, err := cb.CreateQP(rocev2.QPAttr{PD: pb, RecvCQ: cqb})
	require.NoError(t, err)
	src := make([]byte, 16<<10)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	ms, err := pa.RegisterMR(src, rocev2.AccessLocalWrite)
	require.NoError(t, err)
	dst, err := pb.RegisterMR(make([]byte, 64<<10), rocev2.AccessLocalWrite|rocev2.AccessRemoteWrite|rocev2.AccessRemoteRead)
	require.NoError(t, err)

	done := 0
	wait := func(n int) {
		var wc [8]rocev2.WorkCompletion
		require.NoError(t, p.RunUntil(func() bool {
			k := cqa.Poll(wc[:])
			for _, w := range wc[:k] {
				require.Equal(t, rocev2.StatusSuccess, w.Status, "%+v", w)
			}
			done += k
			cqb.Poll(wc[:])
			return done >= n
		}, p.Now+1e9))
	}
	post := func(wr rocev2.SendWR) { require.NoError(t, qa.PostSend(p.Now, wr)) }
	write := func(id uint64, op rocev2.WROpcode, off, n int) {
		post(rocev2.SendWR{ID: id, Opcode: op, Local: ms.SGE(0, n), RemoteAddr: dst.Addr() + uint64(off), RKey: dst.RKey(), Imm: 0x1234})
	}
	recv := func(off, n int) {
		require.NoError(t, qb.PostRecv(p.Now, rocev2.RecvWR{ID: uint64(off), Local: dst.SGE(off, n)}))
	}

	// WRITE First/Middle/Last with one Middle lost: NAK, go-back-N.
	dropNext = true
	write(1, rocev2.WRWrite, 0, 6000)
	wait(1)
	// WRITE Only; WRITE with immediate, Only and Last.
	recv(40000, 16)
	recv(40016, 16)
	write(2, rocev2.WRWrite, 7000, 333)
	write(3, rocev2.WRWriteImm, 8000, 100)
	write(4, rocev2.WRWriteImm, 9000, 2500)
	wait(4)
	// SEND Only, SEND with immediate (First/Middle/Last), after an RNR NAK.
	recv(41000, 5000)
	post(rocev2.SendWR{ID: 5, Opcode: rocev2.WRSend, Local: ms.SGE(0, 77)})
	wait(5)
	post(rocev2.SendWR{ID: 6, Opcode: rocev2.WRSendImm, Local: ms.SGE(0, 2100), Imm: 0xABCD})
	require.NoError(t, p.RunUntil(func() bool { return ca.Counters().RNRNaksReceived > 0 }, p.Now+1e9))
	recv(46000, 4000)
	wait(6)
	// SEND Only with immediate; SEND First/Middle/Last.
	recv(50000, 100)
	recv(51000, 4000)
	post(rocev2.SendWR{ID: 61, Opcode: rocev2.WRSendImm, Local: ms.SGE(0, 10), Imm: 1})
	post(rocev2.SendWR{ID: 62, Opcode: rocev2.WRSend, Local: ms.SGE(0, 2100)})
	wait(8)
	// READ: a multi-packet one and an Only.
	post(rocev2.SendWR{ID: 7, Opcode: rocev2.WRRead, Local: ms.SGE(0, 3000), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	post(rocev2.SendWR{ID: 8, Opcode: rocev2.WRRead, Local: ms.SGE(4000, 10), RemoteAddr: dst.Addr() + 100, RKey: dst.RKey()})
	wait(10)
	// CE-marked WRITEs: CNPs.
	marking = true
	write(9, rocev2.WRWrite, 0, 16<<10)
	wait(11)
	marking = false
	require.NoError(t, p.RunUntil(func() bool { return p.Link.InFlight() == 0 }, p.Now+1e9))
	require.Greater(t, ca.Counters().NaksReceived, uint64(0))
	require.Greater(t, ca.Counters().CNPsReceived, uint64(0))
	return frames
}

// writePcap writes the frames as Ethernet/IPv4/UDP: A is 10.0.0.1, B
// 10.0.0.2, UDP destination port 4791, DSCP and ECN as a RoCEv2 NIC sets
// them (rocev2.TrafficClass), CE on the packets the test marked.
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
		if fr.ce {
			h.ECN = rocev2.ECNCE
		}
		require.NoError(t, w.WriteUDP(int64(fr.ts), h, fr.payload))
	}
	require.NoError(t, bw.Flush())
}
