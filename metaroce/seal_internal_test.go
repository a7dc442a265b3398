package metaroce

import (
	"encoding/binary"
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// FuzzReplayWindow checks the per-path replay window against a model (a
// set of every pn ever marked): a pn marked before is never fresh, a pn
// never marked inside the window is fresh, and what lies below the window
// is old. The input is a walk of pns: each two bytes a signed step.
func FuzzReplayWindow(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0xff, 0xff, 2, 0})
	f.Add([]byte{0x7f, 0xff, 0x80, 0x01, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		var w replayWindow
		seen := map[uint64]bool{}
		pn := uint64(1 << 20)
		for i := 0; i+1 < len(data); i += 2 {
			pn += uint64(int64(int16(binary.BigEndian.Uint16(data[i:]))))
			v := w.check(pn)
			old := w.top/64-pn/64 >= replayWords && pn <= w.top
			switch {
			case seen[pn] && v == pnFresh:
				t.Fatalf("pn %d marked before, judged fresh (top %d)", pn, w.top)
			case !seen[pn] && !old && v != pnFresh:
				t.Fatalf("pn %d never marked, inside the window, judged %d (top %d)", pn, v, w.top)
			case old && v != pnOld:
				t.Fatalf("pn %d below the window judged %d (top %d)", pn, v, w.top)
			}
			if v == pnFresh {
				w.mark(pn)
				seen[pn] = true
			}
		}
	})
}

// TestSealedLayout pins the sealed packet forms of docs/protocol.md §17:
// the flag bits, the trailers' sizes and places, and the per-path packet
// numbers (from 1, one more per packet on the path, resends included).
func TestSealedLayout(t *testing.T) {
	require := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Fatalf(format, args...)
		}
	}
	require(FlagSealed == 0x0004 && FlagEncrypted == 0x0008 && FlagKeyPhase == 0x0010, "flag values")
	require(TagLen == 16 && PNLen == 8 && SealLen == 24 && HelloLen == 16, "trailer sizes")
	for _, mode := range []SecurityMode{SecurityAuth, SecurityEncrypt} {
		cfg := Config{Paths: 2, MTU: 1024, Rand: verbs.NewSeededRandom(1),
			Security: Security{Mode: mode, Secret: []byte("sixteen bytes at least")}}
		w := newWirePair(t, cfg)
		var pkts [][]byte
		w.drop = func(_ int, pkt []byte) bool { pkts = append(pkts, pkt); return false }
		ca, _ := w.connect(t)
		require(ca.Established(), "not established")
		byOp := map[Opcode][]byte{}
		for _, p := range pkts {
			if byOp[Opcode(p[1])] == nil {
				byOp[Opcode(p[1])] = p
			}
		}
		want := FlagSealed
		if mode == SecurityEncrypt {
			want |= FlagEncrypted
		}
		for op, n := range map[Opcode]int{
			OpConnect: HeaderLen + ConnectLen + HelloLen + TagLen,  // 80
			OpAccept:  HeaderLen + ConnectLen + SealLen + HelloLen, // 88
		} {
			p := byOp[op]
			require(p != nil && len(p) == n, "%v %v: %d bytes, want %d", mode, op, len(p), n)
			require(HeaderFlags(binary.BigEndian.Uint16(p[2:]))&flagsSeal == want, "%v %v flags %#x", mode, op, p[2:4])
		}
		acc := byOp[OpAccept]
		require(binary.BigEndian.Uint64(acc[len(acc)-HelloLen-PNLen:]) == 1, "ACCEPT is the acceptor's first packet on its path: pn 1")
		// In encrypt mode the ACCEPT's extension is enciphered; in auth it is in clear.
		var cb ConnectBody
		clear := cb.Decode(acc[HeaderLen:HeaderLen+ConnectLen]) == nil && cb.Paths == 2
		require(clear == (mode == SecurityAuth), "%v: ACCEPT extension in clear = %v", mode, clear)
	}
}

// BenchmarkSealedRefusal is what a forgery costs the receiver
// (docs/security.md): a connection packet whose tag fails (header-only
// and 4 KiB), a PSK-MAC packet whose MAC fails, and a connection's key
// derivation (what a replayed CONNECT from a new address costs).
func BenchmarkSealedRefusal(b *testing.B) {
	cfg := Config{Paths: 2, MTU: 4096, Rand: verbs.NewSeededRandom(1),
		Security: Security{Mode: SecurityAuth, Secret: []byte("sixteen bytes at least")}}
	w := newWirePair(b, cfg)
	_, cb := w.connect(b)
	e := w.ep[1]
	for _, size := range []int{0, 4096} {
		b.Run("tag/payload="+itoa(size), func(b *testing.B) {
			p := make([]byte, HeaderLen+size+SealLen)
			h := Header{Opcode: OpNop, DstConn: cb.LocalID(), SrcConn: cb.RemoteID(), Flags: FlagSealed}
			h.Put(p)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				binary.BigEndian.PutUint64(p[len(p)-PNLen:], uint64(i)+1<<40)
				e.Receive(w.now, p, verbs.RxMeta{Peer: 0})
			}
			if cb.Counters().AuthFailures < uint64(b.N) {
				b.Fatal("forgeries not refused")
			}
		})
	}
	b.Run("psk-mac", func(b *testing.B) {
		p := make([]byte, HeaderLen+TagLen)
		h := Header{Opcode: OpReset, DstConn: cb.LocalID(), SrcConn: cb.RemoteID(), Flags: FlagSealed}
		h.Put(p)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			e.Receive(w.now, p, verbs.RxMeta{Peer: 0})
		}
		if !cb.Established() {
			b.Fatal("a forged RESET ended the connection")
		}
	})
	b.Run("derive", func(b *testing.B) {
		var s connSec
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = s.install(e, w.now, s.hello[:], s.hello[:], 1, 2, 3, 4, false)
		}
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestSealedResetNoAmplifier: in the sealed modes a packet for an unknown
// connection is answered with a RESET (48 bytes, PSK MAC) only if it is at
// least as long as the smallest sealed packet (56 bytes); a bare header is
// dropped unanswered.
func TestSealedResetNoAmplifier(t *testing.T) {
	cfg := Config{Paths: 2, MTU: 1024, Rand: verbs.NewSeededRandom(1),
		Security: Security{Mode: SecurityEncrypt, Secret: []byte("sixteen bytes at least")}}
	w := newWirePair(t, cfg)
	b := w.ep[1]
	for _, n := range []int{HeaderLen, HeaderLen + SealLen} {
		p := make([]byte, n)
		h := Header{Opcode: OpKeepalive, DstConn: 12345, SrcConn: 678, Flags: FlagSealed | FlagEncrypted}
		h.Put(p)
		sent := b.Counters().ResetsSent
		b.Receive(w.now, p, verbs.RxMeta{Peer: 0})
		meta, ok := b.NextPacket(w.now, w.buf)
		if n < HeaderLen+SealLen {
			if ok || b.Counters().ResetsSent != sent {
				t.Fatalf("a %d-byte packet was answered", n)
			}
			continue
		}
		if !ok || Opcode(w.buf[1]) != OpReset || meta.Len != HeaderLen+TagLen || meta.Len > n {
			t.Fatalf("a %d-byte packet: answer %v %d bytes, want a RESET of %d", n, ok, meta.Len, HeaderLen+TagLen)
		}
	}
}
