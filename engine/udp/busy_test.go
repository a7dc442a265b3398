package udp

import (
	"github.com/metaroce/metaroce/verbs"
	"testing"
	"time"
)

// flood is a transport that always has a packet ready (a sender that
// never goes idle), one per entropy in turn, and counts what arrives.
type flood struct {
	entropies int
	next      int
	got       int
}

func (f *flood) Receive(verbs.Time, []byte, verbs.RxMeta) { f.got++ }
func (f *flood) NextPacket(_ verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	e := verbs.Entropy(50000 + f.next%f.entropies)
	f.next++
	buf[0] = 1
	return verbs.TxMeta{Len: 64, TxRoute: verbs.TxRoute{Entropy: e}}, true
}
func (f *flood) NextDeadline() verbs.Time { return verbs.Never }
func (f *flood) OnTimer(verbs.Time)       {}
func (f *flood) MaxPacketLen() int        { return 2048 }

// echo is a transport that answers every packet with one of its own.
type echo struct{ owed int }

func (e *echo) Receive(verbs.Time, []byte, verbs.RxMeta) { e.owed++ }
func (e *echo) NextPacket(_ verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if e.owed == 0 {
		return verbs.TxMeta{}, false
	}
	e.owed--
	buf[0] = 2
	return verbs.TxMeta{Len: 16, TxRoute: verbs.TxRoute{Entropy: 40000}}, true
}
func (e *echo) NextDeadline() verbs.Time { return verbs.Never }
func (e *echo) OnTimer(verbs.Time)       {}
func (e *echo) MaxPacketLen() int        { return 2048 }

// TestBusySenderReadsAcks is issue 13: after one idle Step (which waits
// with a read deadline) a sender that never goes idle again must still
// receive what its peer answers, long after that deadline has passed.
// Before the fix the deadline stayed set, every later read failed with
// "deadline exceeded", and A received nothing.
func TestBusySenderReadsAcks(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	a, b := &flood{entropies: 1}, &echo{}
	if err := p.b[1].Attach(b); err != nil {
		t.Fatal(err)
	}
	// A idles first: nothing to send yet, so its Step waits 1 ms under
	// a read deadline.
	if err := p.b[0].Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b[0].Step(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the deadline is long past
	p.b[0].t = a                     // now a sender that never idles (same packet size)
	end := time.Now().Add(5 * time.Second)
	for a.got < 100 && time.Now().Before(end) {
		for _, be := range p.b {
			if _, err := be.Step(time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.got < 100 {
		t.Fatalf("the busy sender received %d answers (B sent %d), want >= 100", a.got, p.b[1].Stats().TxPackets)
	}
}
