package rocev2

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Fuzz targets. Run one with
//
//	go test -run '^$' -fuzz '^FuzzPacketDecode$' -fuzztime 30s ./rocev2/
//
// or all of them with scripts/fuzz-all.sh. Inputs that fail are saved
// under testdata/fuzz/ and replayed by every plain `go test`.

// capturedPackets runs a small exchange (WRITE, SEND with immediate, READ,
// a loss for a NAK, a CNP, CM) and returns every packet both sides sent:
// the seeds of the fuzz targets.
func capturedPackets(tb testing.TB) [][]byte {
	var out [][]byte
	d := newDirectPair(tb, Config{MTU: 256})
	writes := 0
	d.tap = func(_ int, pkt []byte) {
		out = append(out, append([]byte(nil), pkt...))
		if Opcode(pkt[0]).IsWrite() {
			if writes++; writes == 2 {
				pkt[len(pkt)-1] ^= 1 // lost: the responder NAKs the gap
			}
		}
	}
	dst, _ := d.qb.pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	src, _ := d.qa.pd.RegisterMR(bytes.Repeat([]byte{7}, 4096), verbs.AccessLocalWrite)
	_ = d.qb.PostRecv(d.now, verbs.RecvWR{ID: 1, Local: dst.SGE(0, 1000)})
	_ = d.qa.PostSend(d.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, 1000), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	_ = d.qa.PostSend(d.now, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: src.SGE(0, 999), Imm: 5})
	_ = d.qa.PostSend(d.now, verbs.SendWR{ID: 3, Opcode: verbs.WRRead, Local: src.SGE(0, 700), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	_ = d.qa.PostSend(d.now, verbs.SendWR{ID: 4, Opcode: verbs.WRWriteImm, Local: src.SGE(0, 3), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
	d.cb.np.onCE(d.now)
	for i := 0; i < 50; i++ {
		d.pump()
	}
	for _, attr := range []uint16{AttrREQ, AttrREP, AttrRTU, AttrDREQ} {
		m := d.ca.cmMessage(attr)
		b := make([]byte, CMPacketLen)
		n := d.a.putCM(b, 1, &m)
		out = append(out, b[:n])
	}
	return out
}

func FuzzBTHDecode(f *testing.F) {
	for _, p := range capturedPackets(f) {
		f.Add(p[:BTHLen])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var h BTH
		if h.Decode(data) != nil {
			return
		}
		require.True(t, h.Opcode.Valid())
		out := make([]byte, BTHLen)
		h.Put(out)
		want := append([]byte(nil), data[:BTHLen]...)
		want[4] &= 0xC0 // reserved bits are not kept
		want[8] &= 0x80
		require.Equal(t, want, out)
	})
}

func FuzzAETHDecode(f *testing.F) {
	for _, s := range []Syndrome{SynACK, SynNAKSequence, SynRNR | 12, SynNAKRemoteAccess} {
		b := make([]byte, AETHLen)
		(&AETH{Syndrome: s, MSN: 77}).Put(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a AETH
		if a.Decode(data) != nil {
			return
		}
		out := make([]byte, AETHLen)
		a.Put(out)
		require.Equal(t, data[:AETHLen], out)
	})
}

func FuzzRETHDecode(f *testing.F) {
	b := make([]byte, RETHLen)
	(&RETH{VA: 1 << 40, RKey: 0x101, DMALen: 4096}).Put(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r RETH
		if r.Decode(data) != nil {
			require.Less(t, len(data), RETHLen)
			return
		}
		out := make([]byte, RETHLen)
		r.Put(out)
		require.Equal(t, data[:RETHLen], out)
	})
}

func FuzzDETHDecode(f *testing.F) {
	b := make([]byte, DETHLen)
	(&DETH{QKey: GSIQKey, SrcQP: 1}).Put(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d DETH
		if d.Decode(data) != nil {
			return
		}
		out := make([]byte, DETHLen)
		d.Put(out)
		want := append([]byte(nil), data[:DETHLen]...)
		want[4] = 0 // reserved
		require.Equal(t, want, out)
	})
}

func FuzzPacketDecode(f *testing.F) {
	for _, p := range capturedPackets(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Packet
		if p.Decode(data) != nil {
			return
		}
		hl := HeaderLen(p.BTH.Opcode)
		require.NotZero(t, hl)
		require.Equal(t, len(data), hl+len(p.Payload)+int(p.BTH.PadCount)+ICRCLen)
		require.Zero(t, (len(data)-hl-ICRCLen)%4)
		if len(p.Payload) > 0 {
			require.Equal(t, data[hl:hl+len(p.Payload)], p.Payload)
		}
	})
}

func FuzzCMDecode(f *testing.F) {
	for _, p := range capturedPackets(f) {
		var pk Packet
		if pk.Decode(p) == nil && pk.BTH.Opcode == OpUDSendOnly {
			f.Add(pk.Payload)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m CMMessage
		if m.Decode(data) != nil {
			return
		}
		// Decoding is idempotent: what was understood re-encodes to a MAD
		// that decodes to the same message.
		b := make([]byte, MADLen)
		m.Put(b)
		var g CMMessage
		require.NoError(t, g.Decode(b))
		require.Equal(t, m, g)
	})
}

// FuzzEndpointReceive feeds arbitrary packets to an endpoint with an
// established QP. The harness seals each input with a valid ICRC for the QP
// (so the fuzzer explores what lies behind the ICRC check) and aims it at
// the QP or at QP1. Nothing may panic, and memory without remote write
// access must never change.
func FuzzEndpointReceive(f *testing.F) {
	for _, p := range capturedPackets(f) {
		f.Add(p, false)
	}
	f.Add(make([]byte, 40), true)
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		d := newDirectPair(t, Config{MTU: 256})
		writable, _ := d.qb.pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		readOnly, _ := d.qb.pd.RegisterMR(bytes.Repeat([]byte{1}, 4096), verbs.AccessRemoteRead)
		local, _ := d.qb.pd.RegisterMR(bytes.Repeat([]byte{2}, 4096), verbs.AccessLocalWrite)
		_ = d.qb.PostRecv(d.now, verbs.RecvWR{ID: 1, Local: local.SGE(0, 100)})
		_ = writable
		pkt := append([]byte(nil), data...)
		if !raw && len(pkt) >= BTHLen+ICRCLen {
			flow := d.cb.rxFlow
			if pkt[5] == 0 && pkt[6] == 0 && pkt[7] == 1 {
				flow = Flow{SrcIP: d.cb.rxFlow.SrcIP, DstIP: d.cb.rxFlow.DstIP, SrcPort: GSIPort}
			} else {
				pkt[5], pkt[6], pkt[7] = byte(d.cb.qpn>>16), byte(d.cb.qpn>>8), byte(d.cb.qpn)
			}
			SealICRC(pkt, len(pkt)-ICRCLen, flow)
		}
		d.b.Receive(d.now, pkt, verbs.RxMeta{Peer: 0, CE: len(pkt)%3 == 0})
		for i := 0; i < 5; i++ {
			d.pump()
		}
		require.Equal(t, bytes.Repeat([]byte{1}, 4096), readOnly.Bytes()[:4096])
		lb := local.Bytes()
		require.Equal(t, bytes.Repeat([]byte{2}, 4096-100), lb[100:], "a receive never spills")
	})
}
