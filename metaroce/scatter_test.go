package metaroce_test

import (
	"bytes"
	"testing"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// recordA runs the packet path of sh for packets WRITE packets and
// returns every packet a sent, as it was on the wire.
func recordA(t *testing.T, sh packetPathShape, packets int) (*packetPath, [][]byte) {
	t.Helper()
	pp := newPacketPath(t, sh)
	var pkts [][]byte
	pp.tap = func(pkt []byte) { pkts = append(pkts, bytes.Clone(pkt)) }
	pp.run(packets)
	return pp, pkts
}

// TestScatterMatchesCopy runs the same deterministic transfer twice, once
// with the copying NextPacket and once with NextPacketScatter, and wants
// the same bytes on the wire, packet for packet: the scatter form changes
// who copies the payload, not the packet (headers, CRC trailer).
func TestScatterMatchesCopy(t *testing.T) {
	for _, payload := range []int{256, 1024, ppMTU} {
		sh := packetPathShape{8, 1, 1, payload, mr.SecurityNone, 0, 0}
		_, want := recordA(t, sh, 300)
		_, again := recordA(t, sh, 300)
		if len(want) != len(again) {
			t.Fatalf("payload %d: the copying form is not deterministic (%d, %d packets): the comparison would mean nothing", payload, len(want), len(again))
		}
		sh.scatter = 1
		pp, got := recordA(t, sh, 300)
		if pp.scattered < 300 {
			t.Fatalf("payload %d: %d packets scattered, want >= 300", payload, pp.scattered)
		}
		if len(got) != len(want) {
			t.Fatalf("payload %d: %d packets scattered, %d copied", payload, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("payload %d: packet %d differs (%d vs %d bytes)", payload, i, len(got[i]), len(want[i]))
			}
		}
	}
}

// TestScatterThresholdAndSealedFallback: a payload under the threshold,
// and every packet in the sealed modes, is built whole into buf (Payload
// nil), and the transfer still completes.
func TestScatterThresholdAndSealedFallback(t *testing.T) {
	for _, sh := range []packetPathShape{
		{8, 1, 1, 256, mr.SecurityNone, 257, 0},
		{8, 1, 1, ppMTU, mr.SecurityAuth, 1, 0},
		{8, 1, 1, ppMTU, mr.SecurityEncrypt, 1, 0},
	} {
		pp := newPacketPath(t, sh)
		pp.run(200)
		if pp.data < 200 || pp.scattered != 0 {
			t.Fatalf("%s: %d data packets, %d scattered; want >= 200, 0", sh, pp.data, pp.scattered)
		}
	}
}

// oneWrite sets up a packet path with one-packet WRITEs of 1 KiB and
// posts one, filling the source with fill; it returns the scattered
// packet's parts (headers copied, payload by reference) without
// delivering it.
func oneWrite(t *testing.T, fill byte) (*packetPath, []byte, mr.Scatter, verbs.TxMeta) {
	t.Helper()
	pp := newPacketPath(t, packetPathShape{8, 1, 1, 1024, mr.SecurityNone, 1, 0})
	src := pp.src.Bytes()
	for i := range src {
		src[i] = fill
	}
	if err := pp.qps[0].PostSend(pp.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: pp.src.SGE(0, pp.msg),
		RemoteAddr: pp.dst.Addr(), RKey: pp.dst.RKey()}); err != nil {
		t.Fatal(err)
	}
	var sc mr.Scatter
	for {
		meta, ok := pp.eps[0].NextPacketScatter(pp.now, pp.buf, 1, &sc)
		if !ok {
			t.Fatal("no data packet")
		}
		if sc.Payload != nil {
			if &sc.Payload[0] != &src[0] || len(sc.Payload) != pp.msg || cap(sc.Payload) != pp.msg {
				t.Fatalf("payload is not the source's place, capped: len %d cap %d", len(sc.Payload), cap(sc.Payload))
			}
			return pp, bytes.Clone(pp.buf[:sc.HdrLen]), sc, meta
		}
		pp.eps[meta.Peer].Receive(pp.now, pp.buf[:meta.Len], verbs.RxMeta{Peer: 0})
	}
}

// wire assembles a scattered packet from its parts, reading the payload
// from where it lies now.
func wire(hdr []byte, sc mr.Scatter) []byte {
	pkt := append(bytes.Clone(hdr), sc.Payload...)
	return append(pkt, sc.Trailer[:]...)
}

// TestScatterPayloadChangedFailsCRC: a packet whose payload changed after
// it was built (the application wrote its buffer while the copy was
// still queued in the driver) fails its CRC at the receiver and places
// nothing; the loss repair then sends the memory as it is.
func TestScatterPayloadChangedFailsCRC(t *testing.T) {
	pp, hdr, sc, _ := oneWrite(t, 0xAA)
	sc.Payload[10] = 0x55 // the application, too early
	z := pp.eps[1]
	before := z.Counters().CRCDrops
	z.Receive(pp.now, wire(hdr, sc), verbs.RxMeta{Peer: 0})
	if z.Counters().CRCDrops != before+1 {
		t.Fatalf("CRC drops %d -> %d, want one more", before, z.Counters().CRCDrops)
	}
	if d := pp.dst.Bytes()[:pp.msg]; bytes.IndexByte(d, 0xAA) >= 0 || bytes.IndexByte(d, 0x55) >= 0 {
		t.Fatal("a packet that failed its CRC placed bytes")
	}
	// The original is lost as far as the sender knows: its repair resends
	// from the memory, which now holds the changed byte.
	if !completeOne(pp) {
		t.Fatal("the WRITE never completed after its copy failed the CRC")
	}
	if d := pp.dst.Bytes(); d[10] != 0x55 || d[11] != 0xAA {
		t.Fatalf("placed bytes %#x %#x, want the memory as resent (0x55 0xaa)", d[10], d[11])
	}
}

// TestScatterLateCopyNotPlaced: a copy still queued after its message
// completed (the application may then reuse both buffers) is a duplicate:
// delivered intact it is not placed again; delivered after the
// application rewrote the source it fails its CRC. Either way the
// receiver's memory keeps what the application put there since.
func TestScatterLateCopyNotPlaced(t *testing.T) {
	pp, hdr, sc, _ := oneWrite(t, 0xAA)
	z := pp.eps[1]
	z.Receive(pp.now, wire(hdr, sc), verbs.RxMeta{Peer: 0})
	if !completeOne(pp) {
		t.Fatal("the WRITE never completed")
	}
	if pp.dst.Bytes()[0] != 0xAA {
		t.Fatal("the WRITE did not place its bytes")
	}
	dst := pp.dst.Bytes()[:pp.msg]
	for i := range dst {
		dst[i] = 0x11 // the receiving application reuses its buffer
	}
	z.Receive(pp.now, wire(hdr, sc), verbs.RxMeta{Peer: 0}) // the late copy, intact
	before := z.Counters().CRCDrops
	sc.Payload[0] = 0x22 // the sending application reuses its buffer
	z.Receive(pp.now, wire(hdr, sc), verbs.RxMeta{Peer: 0})
	if z.Counters().CRCDrops != before+1 {
		t.Fatalf("CRC drops %d -> %d, want one more for the changed copy", before, z.Counters().CRCDrops)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0x11}, len(dst))) {
		t.Fatal("a late copy was placed after its message completed")
	}
}

// completeOne runs rounds until the one WRITE outstanding completes, at
// most 100000 of them; false if it never does.
func completeOne(pp *packetPath) bool {
	pp.out = 1
	for i := 0; i < 100000 && pp.out > 0; i++ {
		pp.round()
		pp.out -= pp.cq.Poll(pp.wcs)
	}
	return pp.out == 0
}
