package udp

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// smallSends sends msgs SENDs of size bytes from A to B over loopback,
// outstanding at a time, and checks that each landed in its own receive
// buffer, whole and in order. It returns the datagrams A's backend sent
// and the packets A's connection sent as follow-ons (TxCoalesced).
func smallSends(t *testing.T, ca, cb Config, msgs, size, outstanding int) (datagrams, followOns, rxCoalesced uint64) {
	t.Helper()
	p := newPair(t, ca, cb)
	ea, eb := metaroceEndpoints(t, p, 4)
	conn, cbn := connectMetaroce(t, p, ea, eb)
	src, dst := make([]byte, msgs*size), make([]byte, msgs*size)
	for i := range src {
		src[i] = byte(i*13 + 5)
	}
	cqa, cqb := verbs.NewCompletionQueue(2*outstanding), verbs.NewCompletionQueue(msgs)
	pda, pdb := ea.AllocPD(), eb.AllocPD()
	qa, err := conn.CreateQP(0, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := cbn.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := pda.RegisterMR(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	md, err := pdb.RegisterMR(dst, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for k := range msgs {
		if err := qb.PostRecv(p.b[1].Now(), verbs.RecvWR{ID: uint64(k), Local: md.SGE(k*size, size)}); err != nil {
			t.Fatal(err)
		}
	}
	c0 := p.b[0].Stats().TxPackets
	posted, sent, received := 0, 0, 0
	post := func() {
		for posted < msgs && posted-sent < outstanding {
			if err := qa.PostSend(p.b[0].Now(), verbs.SendWR{ID: uint64(posted), Opcode: verbs.WRSend,
				Local: ms.SGE(posted*size, size)}); err != nil {
				t.Fatal(err)
			}
			posted++
		}
	}
	post()
	wcs := make([]verbs.WorkCompletion, 32)
	p.run(t, 20*time.Second, func() bool {
		for _, wc := range wcs[:cqa.Poll(wcs)] {
			if wc.Status != verbs.StatusSuccess {
				t.Fatalf("send completion %+v", wc)
			}
			sent++
		}
		for _, wc := range wcs[:cqb.Poll(wcs)] {
			if wc.Status != verbs.StatusSuccess || wc.WRID != uint64(received) || int(wc.ByteLen) != size {
				t.Fatalf("receive %d: completion %+v", received, wc)
			}
			received++
		}
		post()
		return sent == msgs && received == msgs
	})
	if !bytes.Equal(src, dst) {
		t.Fatal("a message is not where it belongs")
	}
	return p.b[0].Stats().TxPackets - c0, conn.Counters().TxCoalesced, eb.Counters().RxCoalesced
}

// TestSmallSendsCoalesce: 64-byte SENDs, 32 outstanding, over loopback.
// By default (Config.Coalesce 0: engine.AutoCoalesce) most of them share
// datagrams: fewer datagrams than messages, the receiver splits them
// (RxCoalesced), and every message lands in its own receive in order,
// also with 3% of the datagrams lost at each end (a lost datagram loses
// all the packets it carries; the core resends each). With Coalesce 1
// nothing is coalesced.
func TestSmallSendsCoalesce(t *testing.T) {
	const msgs, size, outstanding = 2000, 64, 32
	dg, fo, rx := smallSends(t, Config{}, Config{}, msgs, size, outstanding)
	t.Logf("coalesce 0: %d datagrams for %d SENDs, %d follow-ons, %d coalesced datagrams received", dg, msgs, fo, rx)
	if fo < msgs/4 || rx == 0 || dg >= msgs {
		t.Errorf("coalesce 0: %d follow-ons, %d coalesced datagrams received, %d datagrams for %d SENDs", fo, rx, dg, msgs)
	}
	dg, fo, rx = smallSends(t, Config{Loss: 0.03, Seed: 3}, Config{Loss: 0.03, Seed: 4}, msgs, size, outstanding)
	t.Logf("coalesce 0, 3%% loss: %d datagrams, %d follow-ons, %d coalesced datagrams received", dg, fo, rx)
	if fo == 0 || rx == 0 {
		t.Errorf("coalesce 0 under loss: %d follow-ons, %d coalesced datagrams received", fo, rx)
	}
	dg, fo, rx = smallSends(t, Config{Coalesce: 1}, Config{Coalesce: 1}, msgs, size, outstanding)
	t.Logf("coalesce 1: %d datagrams, %d follow-ons", dg, fo)
	if fo != 0 || rx != 0 || dg < msgs {
		t.Errorf("coalesce 1: %d follow-ons, %d coalesced datagrams received, %d datagrams for %d SENDs", fo, rx, dg, msgs)
	}
}
