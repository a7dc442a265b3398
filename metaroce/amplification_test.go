package metaroce_test

import (
	"testing"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Anti-amplification (amplification.go): an attacker who sends packets
// with a victim's address as their source gets the endpoint to send the
// victim less than three times what it sent, whatever it knows but the
// connection's tokens. The issue measured 13.6x for a CONNECT (an ACCEPT
// and ~18 keepalives) and 2,362x for a READ_REQ plus a forged ACK.

const victim = verbs.PeerHandle(5)

// reflector is an accepting endpoint and what it sent to the victim.
type reflector struct {
	e      *mr.Endpoint
	now    verbs.Time
	buf    []byte
	rx, tx int // bytes from and to the victim
	sent   int // packets to the victim
}

func newReflector(t *testing.T) *reflector {
	e, err := mr.NewEndpoint(mr.Config{Node: 2, AcceptIncoming: true, Paths: 4, Rand: verbs.NewSeededRandom(77)})
	require.NoError(t, err)
	return &reflector{e: e, buf: make([]byte, e.MaxPacketLen())}
}

// from delivers pkt as if the victim had sent it.
func (r *reflector) from(pkt []byte) {
	r.rx += len(pkt)
	r.e.Receive(r.now, pkt, verbs.RxMeta{Peer: victim})
}

// run lets the endpoint send and run its timers for d.
func (r *reflector) run(d time.Duration) {
	end := r.now.Add(d)
	for {
		for {
			meta, ok := r.e.NextPacket(r.now, r.buf)
			if !ok {
				break
			}
			if meta.Peer == victim {
				r.tx += meta.Len
				r.sent++
			}
		}
		next := r.e.NextDeadline()
		if next > end {
			r.now = end
			return
		}
		r.now = max(r.now, next)
		r.e.OnTimer(r.now)
	}
}

// TestAmplificationConnect: spoofed CONNECTs (one, and one repeated as a
// client whose ACCEPT was lost would) draw an ACCEPT each within the
// budget, and nothing else until the connection is dropped: under 3x.
func TestAmplificationConnect(t *testing.T) {
	for _, repeats := range []int{1, 3} {
		r := newReflector(t)
		for i := 0; i < repeats; i++ {
			r.from(forgeConnect(7, 0x70, 0x1234, 4))
			r.run(time.Millisecond)
		}
		r.run(time.Second) // long past keepalive and peer-dead times
		t.Logf("%d CONNECT(s): %d bytes in, %d out in %d packets (%.2fx)", repeats, r.rx, r.tx, r.sent, float64(r.tx)/float64(r.rx))
		require.Positive(t, r.sent, "the ACCEPT went out: the budget was measured on something")
		require.Less(t, r.tx, 3*r.rx)
		require.Zero(t, r.e.Connections(), "the unproven connection timed out")
	}
}

// TestAmplificationReadAndForgedAcks: the attacker opens a connection in
// the victim's name, knows everything but the tokens (B's connection id,
// incarnation, a region's key and address, each path's generation), and
// sends READ_REQs for 1 MiB at guessed PSNs and ACKs (acknowledging
// whatever B would send, with rate hints) from the victim's address.
// Neither its READ_REQs (outside every first window) nor its ACKs
// (no tag) prove anything, so B sends the victim under 3x what the
// attacker sent; and B's own application writing 1 MiB to the unproven
// connection stays under the same budget.
func TestAmplificationReadAndForgedAcks(t *testing.T) {
	r := newReflector(t)
	pd := r.e.AllocPD()
	src := make([]byte, 1<<20)
	m, err := pd.RegisterMR(src, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	const x = mr.ConnID(0x1234) // the attacker's connection id
	r.from(forgeConnect(7, 0x70, x, 4))
	cb, ok := r.e.Accept()
	require.True(t, ok)
	cq := verbs.NewCompletionQueue(16)
	qp, err := cb.CreateQP(0, verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	guess := verbs.NewSeededRandom(9)
	hdr := func(op mr.Opcode, path int) mr.Header {
		return mr.Header{Opcode: op, DstConn: cb.LocalID(), SrcConn: x, Incarnation: 0x70, Path: verbs.PathID(path)}
	}
	for i := 0; i < 64; i++ {
		// A READ_REQ of the whole region, at a guessed PSN.
		h := hdr(mr.OpReadReq, i%4)
		h.PSN = mr.PSN(guess.Uint64())
		h.Flags = mr.FlagAckReq
		ext := make([]byte, mr.MsgExtLen(mr.OpReadReq, 0))
		(&mr.MsgHeader{MsgSeq: mr.MsgSeq(i), MsgLen: uint32(len(src)), RKey: m.RKey(), RemoteAddr: m.Addr()}).Put(mr.OpReadReq, 0, ext)
		r.from(forge(h, ext))
		// An ACK for every path, acknowledging far ahead, with a hint.
		ack := make([]byte, mr.AckPrefixLen+4*24)
		mr.PutAckPrefix(ack, 4)
		for p := 0; p < 4; p++ {
			b := mr.AckBlock{Path: verbs.PathID(p), Cum: mr.PSN(guess.Uint64()), RateHint: 100000}
			b.Put(ack[mr.AckPrefixLen+p*24:])
		}
		r.from(forge(hdr(mr.OpAck, 0), ack))
		r.run(100 * time.Microsecond)
	}
	// B's own application writes 1 MiB to the "client".
	require.NoError(t, qp.PostSend(r.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: m.SGE(0, len(src)), RemoteAddr: 1 << 40, RKey: 1}))
	r.run(time.Second)
	c := cb.Counters()
	t.Logf("%d bytes in, %d out in %d packets (%.2fx); refused: %d READ_REQs outside the first windows, %d untagged ACKs, %d sends held",
		r.rx, r.tx, r.sent, float64(r.tx)/float64(r.rx), c.OutOfWindow, c.BadTags, c.AmplificationHeld)
	require.Less(t, r.tx, 3*r.rx)
	require.Positive(t, r.sent)
	require.Equal(t, uint64(64), c.OutOfWindow, "every READ_REQ was refused")
	require.Equal(t, uint64(64), c.BadTags, "every forged ACK was refused")
	require.Positive(t, c.AmplificationHeld, "the budget held B's WRITE")
	require.Zero(t, c.PayloadPlaced)
}
