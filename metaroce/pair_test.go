package metaroce

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// wirePair connects two endpoints through a fixed-delay, lossless FIFO,
// with an optional drop hook. It is the minimal harness for unit tests;
// impairments live in engine/memlink.
type wirePair struct {
	ep    [2]*Endpoint
	now   verbs.Time
	delay verbs.Time
	q     []inflight
	drop  func(from int, pkt []byte) bool
	// extra, when set, delays a packet beyond delay (the queue stays
	// ordered by arrival time; equal times keep sending order).
	extra func(from int, pkt []byte) verbs.Time
	buf   []byte
	// coalesce, when above 1, is how many packets each datagram may
	// carry: after NextPacket the pair calls NextCoalesced up to
	// coalesce-1 times (coalesce.go).
	coalesce int
}

type inflight struct {
	at   verbs.Time
	to   int
	pkt  []byte
	meta verbs.TxMeta
}

func newWirePair(t testing.TB, cfg Config) *wirePair {
	a := cfg
	a.Node, a.Incarnation = 1, 11
	b := cfg
	b.Node, b.Incarnation, b.AcceptIncoming = 2, 22, true
	ea, err := NewEndpoint(a)
	require.NoError(t, err)
	eb, err := NewEndpoint(b)
	require.NoError(t, err)
	return &wirePair{ep: [2]*Endpoint{ea, eb}, delay: 1000, buf: make([]byte, ea.MaxPacketLen())}
}

// step moves time to the next event and processes it. It returns false
// when nothing is left to happen.
func (w *wirePair) step() bool {
	for i, e := range w.ep {
		for {
			meta, ok := e.NextPacket(w.now, w.buf)
			if !ok {
				break
			}
			for k := 1; k < w.coalesce; k++ {
				more, ok := e.NextCoalesced(w.now, w.buf, meta.Len)
				if !ok {
					break
				}
				meta = more
			}
			pkt := append([]byte(nil), w.buf[:meta.Len]...)
			if w.drop != nil && w.drop(i, pkt) {
				continue
			}
			at := w.now + w.delay
			if w.extra != nil {
				at += w.extra(i, pkt)
			}
			k := len(w.q)
			for k > 0 && w.q[k-1].at > at {
				k--
			}
			w.q = append(w.q, inflight{})
			copy(w.q[k+1:], w.q[k:])
			w.q[k] = inflight{at: at, to: 1 - i, pkt: pkt, meta: meta}
		}
	}
	next := verbs.Never
	if len(w.q) > 0 {
		next = w.q[0].at
	}
	for _, e := range w.ep {
		if d := e.NextDeadline(); d < next {
			next = d
		}
	}
	if next == verbs.Never {
		return false
	}
	if next > w.now {
		w.now = next
	}
	for len(w.q) > 0 && w.q[0].at <= w.now {
		p := w.q[0]
		w.q = w.q[1:]
		w.ep[p.to].Receive(w.now, p.pkt, verbs.RxMeta{Peer: verbs.PeerHandle(1 - p.to)})
	}
	for _, e := range w.ep {
		if e.NextDeadline() <= w.now {
			e.OnTimer(w.now)
		}
	}
	return true
}

func (w *wirePair) runUntil(t testing.TB, cond func() bool, limit verbs.Time) {
	t.Helper()
	for !cond() {
		require.True(t, w.step(), "nothing left to happen at t=%d", w.now)
		require.Less(t, w.now, limit, "condition not reached by t=%d", limit)
	}
}

// connect opens a connection from endpoint 0 to endpoint 1 and runs until
// both ends have it.
func (w *wirePair) connect(t testing.TB) (ca, cb *Conn) {
	t.Helper()
	ca, err := w.ep[0].Connect(w.now, 1)
	require.NoError(t, err)
	w.runUntil(t, func() bool {
		if cb == nil {
			cb, _ = w.ep[1].Accept()
		}
		return ca.Established() && cb != nil
	}, w.now+1e9)
	return ca, cb
}

func TestPairWriteSendRead(t *testing.T) {
	w := newWirePair(t, Config{Paths: 4, MTU: 1024})
	a, b := w.ep[0], w.ep[1]
	ca, cb := w.connect(t)

	pda, pdb := a.AllocPD(), b.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	qa, err := ca.CreateQP(3, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	qb, err := cb.CreateQP(3, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
	require.NoError(t, err)

	src := make([]byte, 10000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	mra, err := pda.RegisterMR(src, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	dst := make([]byte, 20000)
	mrb, err := pdb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)

	require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: mra.SGE(0, 5000), RemoteAddr: mrb.Addr() + 100, RKey: mrb.RKey()}))
	require.NoError(t, qb.PostRecv(w.now, verbs.RecvWR{ID: 7, Local: mrb.SGE(10000, 8000)}))
	require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: mra.SGE(5000, 3000), Imm: 42}))
	rd := make([]byte, 4000)
	mrr, err := pda.RegisterMR(rd, verbs.AccessLocalWrite)
	require.NoError(t, err)
	// RC ordering (docs/protocol.md §13): the READ, posted after the
	// WRITE, reads what the WRITE wrote.
	require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 3, Opcode: verbs.WRRead, Local: mrr.SGE(0, 4000), RemoteAddr: mrb.Addr() + 1100, RKey: mrb.RKey()}))

	var wcs []verbs.WorkCompletion
	buf := make([]verbs.WorkCompletion, 8)
	w.runUntil(t, func() bool {
		n := cqa.Poll(buf)
		wcs = append(wcs, buf[:n]...)
		n = cqb.Poll(buf)
		wcs = append(wcs, buf[:n]...)
		return len(wcs) == 4
	}, 1e9)
	for _, wc := range wcs {
		require.Equal(t, verbs.StatusSuccess, wc.Status, "%+v", wc)
	}
	require.Equal(t, src[:5000], dst[100:5100])
	require.Equal(t, src[5000:8000], dst[10000:13000])
	require.Equal(t, src[1000:5000], rd)
}
