package rocev2

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// directPair is two endpoints wired back to back without a link: pump
// moves every packet at once. Internal tests, fuzz targets and benchmarks
// use it.
type directPair struct {
	a, b     *Endpoint
	ca, cb   *Conn
	qa, qb   *QueuePair
	cqa, cqb *verbs.CompletionQueue
	now      verbs.Time
	buf      []byte
	tap      func(from int, pkt []byte)
}

func newDirectPair(tb testing.TB, cfg Config) *directPair {
	tb.Helper()
	ca, cb := cfg, cfg
	ca.LocalIP, cb.LocalIP = DefaultPeerIP(0), DefaultPeerIP(1)
	cb.AcceptIncoming = true
	d := &directPair{}
	var err error
	if d.a, err = NewEndpoint(ca); err != nil {
		tb.Fatal(err)
	}
	if d.b, err = NewEndpoint(cb); err != nil {
		tb.Fatal(err)
	}
	d.buf = make([]byte, d.a.MaxPacketLen())
	if d.ca, err = d.a.Connect(0, 1); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 100 && (d.cb == nil || !d.ca.Established() || !d.cb.Established()); i++ {
		d.pump()
		if d.cb == nil {
			d.cb, _ = d.b.Accept()
		}
	}
	if d.cb == nil || !d.cb.Established() {
		tb.Fatal("no connection")
	}
	d.cqa, d.cqb = verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	d.qa, _ = d.ca.CreateQP(verbs.QPAttr{PD: d.a.AllocPD(), SendCQ: d.cqa, RecvCQ: d.cqa})
	d.qb, _ = d.cb.CreateQP(verbs.QPAttr{PD: d.b.AllocPD(), SendCQ: d.cqb, RecvCQ: d.cqb})
	return d
}

// pump delivers everything both sides can send now, then advances the
// clock by 500 ns and runs due timers.
func (d *directPair) pump() {
	for {
		moved := false
		for i, e := range []*Endpoint{d.a, d.b} {
			other := d.b
			if i == 1 {
				other = d.a
			}
			for {
				meta, ok := e.NextPacket(d.now, d.buf)
				if !ok {
					break
				}
				moved = true
				if d.tap != nil {
					d.tap(i, d.buf[:meta.Len])
				}
				other.Receive(d.now, d.buf[:meta.Len], verbs.RxMeta{Peer: verbs.PeerHandle(i)})
			}
		}
		if !moved {
			break
		}
	}
	d.now += 500
	for _, e := range []*Endpoint{d.a, d.b} {
		if e.NextDeadline() <= d.now {
			e.OnTimer(d.now)
		}
	}
}
