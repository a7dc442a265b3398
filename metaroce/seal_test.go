package metaroce_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The sealed modes against an on-path attacker who sees every packet
// (seal.go, docs/security.md "Modes auth and encrypt").

var sealedModes = []mr.SecurityMode{mr.SecurityAuth, mr.SecurityEncrypt}

func sealedConfig(mode mr.SecurityMode, seed uint64) mr.Config {
	return mr.Config{MTU: 1024, Rand: verbs.NewSeededRandom(seed),
		Security: mr.Security{Mode: mode, Secret: []byte("0123456789abcdef0123456789abcdef")}}
}

// TestSealedTransfer: a 256 KiB WRITE over a lossy, reordering link
// arrives with every byte right in both modes, resends included (each a
// new packet number, so no nonce repeats); every packet on the wire is
// sealed, and in encrypt mode the payload never appears in clear.
func TestSealedTransfer(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t, sealedConfig(mode, 7), memlink.Config{Seed: 3, Loss: 0.03, Reorder: 0.05, ReorderDelay: 3000})
			var wire, sealed int
			var clear bool
			var pattern []byte
			f.p.Tap = func(_ int, pkt []byte, _ verbs.TxMeta) {
				wire++
				if binary.BigEndian.Uint16(pkt[2:])&uint16(mr.FlagSealed) != 0 {
					sealed++
				}
				if pattern != nil && bytes.Contains(pkt, pattern) {
					clear = true
				}
			}
			done, src, dst := f.transfer(t, 256<<10)
			pattern = src[5000:5032]
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
			require.Greater(t, wire, 256)
			require.Equal(t, wire, sealed, "every packet sealed")
			require.Equal(t, mode == mr.SecurityAuth, clear, "payload in clear on the wire")
			cb := f.cb.Counters()
			require.Zero(t, cb.AuthFailures)
			require.NotZero(t, f.ca.Counters().Retransmits, "the link's loss made resends")
		})
	}
}

// capture records every packet A sends to B.
func capture(f *fixture) *[][]byte {
	var got [][]byte
	f.p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
		if from == 0 {
			got = append(got, append([]byte(nil), pkt...))
		}
	}
	return &got
}

func firstOf(pkts [][]byte, op mr.Opcode) []byte {
	for _, p := range pkts {
		if mr.Opcode(p[1]) == op {
			return p
		}
	}
	return nil
}

// TestSealedOnPathAttacker: an attacker who saw every packet of a
// transfer flips a bit of a data packet, replays data packets (at once:
// inside the SACK window; and after the path moved on: outside it), and
// forges RESET, CLOSE, ACK, NAK and a newer-generation NOP from captured
// headers. Each is refused
// and counted; the connection stays up, no byte is placed twice or
// changed, and a transfer afterwards completes with every byte right.
func TestSealedOnPathAttacker(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t, sealedConfig(mode, 9), memlink.Config{})
			got := capture(f)
			done, src, dst := f.transfer(t, 64<<10)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
			b := f.p.EP[1]
			inject := func(pkt []byte) {
				b.Receive(f.p.Now, pkt, verbs.RxMeta{Peer: 0})
				require.NoError(t, f.p.RunUntil(func() bool { return true }, f.p.Now+1))
			}
			data := firstOf(*got, mr.OpWrite)
			require.NotNil(t, data)
			before := *f.cb.Counters()

			// A flipped bit anywhere: header, body, tag, packet number.
			// The attacker gives each a fresh packet number (one B has not
			// seen: a seen one is refused as a replay before the tag is
			// checked); the tag fails, whatever bit changed, the packet
			// number included.
			pn := binary.BigEndian.Uint64(data[len(data)-mr.PNLen:])
			offs := []int{12, 20, 26, mr.HeaderLen + 3, len(data) - 30, len(data) - 20, len(data) - 1}
			for i, off := range offs {
				bad := append([]byte(nil), data...)
				binary.BigEndian.PutUint64(bad[len(bad)-mr.PNLen:], pn+1000+uint64(i)*8)
				bad[off] ^= 0x01
				inject(bad)
			}
			// The same packet again, at once (its PSN is inside the SACK
			// window) and every data packet of the transfer (most now far
			// behind the window).
			inject(data)
			n := 0
			for _, p := range *got {
				if mr.Opcode(p[1]) == mr.OpWrite {
					inject(p)
					n++
				}
			}
			cb := f.cb.Counters()
			require.Equal(t, uint64(len(offs)), cb.AuthFailures-before.AuthFailures, "flipped bits")
			require.Equal(t, uint64(n+1), (cb.Replays+cb.ReplaysOld)-(before.Replays+before.ReplaysOld), "replays")
			require.Equal(t, before.PayloadPlaced, cb.PayloadPlaced, "nothing placed again")
			require.Equal(t, before.Duplicates, cb.Duplicates, "replays refused before the scoreboard")

			// Forged control packets from a captured header: a sealed
			// header of the right connection with a made-up body and seal.
			hdr := data[:mr.HeaderLen]
			forgeOp := func(op mr.Opcode, body []byte, trailer int) []byte {
				p := append(append([]byte(nil), hdr...), body...)
				p[1] = byte(op)
				binary.BigEndian.PutUint32(p[20:], 0) // PSN 0: unsequenced
				p = append(p, make([]byte, trailer)...)
				p[len(p)-1] = 0xff // a fresh packet number
				return p
			}
			ack := make([]byte, mr.AckPrefixLen+24)
			ack[0] = 1
			ackPkt := forgeOp(mr.OpAck, ack, mr.SealLen)
			nak := make([]byte, mr.NakLen)
			nakPkt := forgeOp(mr.OpNak, nak, mr.SealLen)
			closePkt := forgeOp(mr.OpClose, nil, mr.SealLen)
			// A NOP of a newer path generation (it would reset B's path in
			// mode none, given the incarnation, which the header shows).
			nop := forgeOp(mr.OpNop, nil, mr.SealLen)
			binary.BigEndian.PutUint16(nop[18:], binary.BigEndian.Uint16(nop[18:])+1)
			binary.BigEndian.PutUint32(nop[20:], 1)
			// A RESET and a CLOSE_ACK carry the PSK MAC; B's view: from A.
			reset := forgeOp(mr.OpReset, nil, mr.TagLen)
			binary.BigEndian.PutUint32(reset[4:], uint32(f.cb.LocalID()))
			binary.BigEndian.PutUint32(reset[8:], uint32(f.ca.LocalID()))
			a0, e0 := f.cb.Counters().AuthFailures, b.Counters().AuthFailures
			for _, p := range [][]byte{ackPkt, nakPkt, closePkt, nop, reset} {
				inject(p)
			}
			// In mode none the same RESET, with a CRC, would end the
			// connection (TestBlindResetFromPeerAddressFails); a CRC
			// packet to a sealed endpoint is not even looked at.
			crcReset := forge(mr.Header{Opcode: mr.OpReset, DstConn: f.cb.LocalID(), SrcConn: f.ca.LocalID()}, nil)
			inject(crcReset)
			require.Equal(t, a0+5, f.cb.Counters().AuthFailures, "ACK, NAK, CLOSE, NOP, and the RESET naming it")
			require.Equal(t, e0+1, b.Counters().AuthFailures, "RESET")
			require.NotZero(t, b.Counters().SealMismatch, "CRC RESET")
			require.True(t, f.cb.Established() && f.ca.Established())

			done, src, dst = f.transfer(t, 32<<10)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
		})
	}
}

// TestSealedForgedAckToSender: the forgery that completed a WRITE with
// nothing placed (issue 15: two ACKs claiming every PSN) and a stream of
// rate_hint=1 ACKs, sent to the data sender A with the header of a real
// ACK from B (ids, incarnation, path and generation all right), while A's
// WRITE is in flight. Each fails its tag and is counted; the WRITE
// completes only when B has every byte.
func TestSealedForgedAckToSender(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t, sealedConfig(mode, 17), memlink.Config{})
			var acks [][]byte
			f.p.Tap = func(from int, pkt []byte, _ verbs.TxMeta) {
				if from == 1 && mr.Opcode(pkt[1]) == mr.OpAck {
					acks = append(acks, append([]byte(nil), pkt...))
				}
			}
			done, _, _ := f.transfer(t, 64<<10)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.NotEmpty(t, acks)
			real := acks[len(acks)-1]
			done, src, dst := f.transfer(t, 256<<10)
			a := f.p.EP[0]
			before := f.ca.Counters().AuthFailures
			forged := 0
			for i := 0; i < 50; i++ {
				// An ACK block claiming far ahead (cum + 1000) or a rate
				// hint of 1 Mbit/s, under a fresh packet number.
				p := append([]byte(nil), real[:mr.HeaderLen]...)
				blk := mr.AckBlock{Path: verbs.PathID(binary.BigEndian.Uint16(p[16:])), PathGen: binary.BigEndian.Uint16(p[18:]),
					Cum: mr.PSN(1000 + i), RateHint: 1}
				body := make([]byte, mr.AckPrefixLen+mr.AckBlockLen)
				mr.PutAckPrefix(body, 1)
				n := blk.Put(body[mr.AckPrefixLen:])
				p = append(p, body[:mr.AckPrefixLen+n]...)
				p = append(p, make([]byte, mr.SealLen)...)
				binary.BigEndian.PutUint64(p[len(p)-mr.PNLen:], 1<<32+uint64(i))
				a.Receive(f.p.Now, p, verbs.RxMeta{Peer: 1})
				forged++
			}
			require.Equal(t, before+uint64(forged), f.ca.Counters().AuthFailures)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst, "the WRITE completed with every byte placed")
		})
	}
}

// TestSealedReplayWindows: replays of captured data packets from three
// distances behind their path's head are all refused before the
// scoreboard: one just received (its PSN inside the SACK window), one
// about 300 packets back (outside the 256-PSN SACK window, inside the
// packet-number window: counted Replays), and the first transfer's, more
// than 448 packets back on their paths (outside both: ReplaysOld).
func TestSealedReplayWindows(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t, sealedConfig(mode, 13), memlink.Config{})
			got := capture(f)
			done, _, _ := f.transfer(t, 64<<10)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			first := len(*got)
			done, src, dst := f.transfer(t, 4<<20)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
			pkts := *got
			// Each data packet's path, PSN and packet number; each path's
			// highest of the last two.
			type at struct {
				path    uint16
				psn, pn uint64
			}
			where := func(p []byte) at {
				return at{binary.BigEndian.Uint16(p[16:]), uint64(binary.BigEndian.Uint32(p[20:])), binary.BigEndian.Uint64(p[len(p)-mr.PNLen:])}
			}
			topPSN, topPN := map[uint16]uint64{}, map[uint16]uint64{}
			for _, p := range pkts {
				w := where(p)
				topPSN[w.path], topPN[w.path] = max(topPSN[w.path], w.psn), max(topPN[w.path], w.pn)
			}
			var recent, middle []byte
			for _, p := range pkts[first:] {
				if mr.Opcode(p[1]) != mr.OpWrite {
					continue
				}
				w := where(p)
				if topPSN[w.path]-w.psn < 16 && recent == nil {
					recent = p
				}
				if d := topPN[w.path] - w.pn; topPSN[w.path]-w.psn > 256 && d >= 280 && d < 400 && middle == nil {
					middle = p
				}
			}
			require.NotNil(t, recent)
			require.NotNil(t, middle, "no packet between the SACK window and the replay window's end")
			b := f.p.EP[1]
			c0 := *f.cb.Counters()
			b.Receive(f.p.Now, recent, verbs.RxMeta{Peer: 0})
			b.Receive(f.p.Now, middle, verbs.RxMeta{Peer: 0})
			old := 0
			for _, p := range pkts[:first] {
				if mr.Opcode(p[1]) == mr.OpWrite {
					b.Receive(f.p.Now, p, verbs.RxMeta{Peer: 0})
					old++
				}
			}
			c := f.cb.Counters()
			require.Equal(t, c0.Replays+2, c.Replays, "inside the packet-number window")
			require.Equal(t, c0.ReplaysOld+uint64(old), c.ReplaysOld, "outside it")
			// A duplicate the scoreboard sees is counted and acknowledged
			// at once (§8.3); these never reach it.
			require.Equal(t, c0.Duplicates, c.Duplicates, "the scoreboard saw none")
			require.Equal(t, c0.PayloadPlaced, c.PayloadPlaced)
		})
	}
}

// TestSealedRekey: with a key epoch every 64 packets, a transfer moves
// through many epochs in both directions without a loss of bytes, and the
// receiver opens packets of the previous epoch still on the way.
func TestSealedRekey(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := sealedConfig(mode, 11)
			cfg.Security.RekeyPackets, cfg.Security.KeyHold = 64, 2*time.Microsecond
			f := newFixture(t, cfg, memlink.Config{Seed: 5, Loss: 0.02, Reorder: 0.1, ReorderDelay: 1000})
			done, src, dst := f.transfer(t, 4<<20)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
			ka, kb := f.ca.Counters().KeyUpdates, f.cb.Counters().KeyUpdates
			require.Greater(t, ka, uint64(2), "A's epochs (its sends, B's ACKs)")
			require.Greater(t, kb, uint64(2))
			require.True(t, f.ca.Established())
		})
	}
}

// TestSealedRekeyHoldsDisagree: a sender that moves to a new epoch every
// 64 packets and 4 µs (its KeyHold is 2 µs) and a receiver that would hold
// the previous key for 1 ms: when the phase bit comes round again while
// the receiver still holds the key before last, that key fails and the
// receiver tries the next one, so the transfer goes on through every
// epoch with every byte right.
func TestSealedRekeyHoldsDisagree(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			a := sealedConfig(mode, 19)
			a.Security.RekeyPackets, a.Security.KeyHold = 64, 2*time.Microsecond
			b := a
			b.Security.KeyHold = time.Millisecond
			f := newFixturePair(t, a, b, memlink.Config{})
			done, src, dst := f.transfer(t, 4<<20)
			require.NoError(t, f.p.RunUntil(done, f.p.Now+10e9))
			require.Equal(t, src, dst)
			require.Greater(t, f.cb.Counters().KeyUpdates, uint64(8), "B followed A through its epochs")
			require.Zero(t, f.cb.Counters().AuthFailures)
		})
	}
}

// TestSealedClose: an orderly close in the sealed modes (CLOSE under the
// connection's keys, CLOSE_ACK under the PSK MAC) ends both sides at once,
// with no failed tag: neither waits for the peer-dead timeout.
func TestSealedClose(t *testing.T) {
	for _, mode := range sealedModes {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t, sealedConfig(mode, 23), memlink.Config{})
			start := f.p.Now
			f.ca.Close(f.p.Now)
			require.NoError(t, f.p.RunUntil(func() bool {
				return f.p.EP[0].Connections() == 0 && f.p.EP[1].Connections() == 0
			}, f.p.Now+50e6))
			require.Less(t, f.p.Now-start, verbs.Time(1e6), "closed by CLOSE and CLOSE_ACK, not by a timeout")
			require.Zero(t, f.p.EP[0].Counters().AuthFailures+f.p.EP[1].Counters().AuthFailures)
			require.Zero(t, f.ca.Counters().AuthFailures+f.cb.Counters().AuthFailures)
		})
	}
}

// TestSealedModesDisagree: auth to encrypt, sealed to none and a wrong
// secret never connect; the refusals are counted.
func TestSealedModesDisagree(t *testing.T) {
	wrong := sealedConfig(mr.SecurityAuth, 2)
	wrong.Security.Secret = []byte("another secret, the same length!")
	for _, c := range []struct {
		name string
		a, b mr.Config
	}{
		{"auth-encrypt", sealedConfig(mr.SecurityAuth, 1), sealedConfig(mr.SecurityEncrypt, 2)},
		{"auth-none", sealedConfig(mr.SecurityAuth, 1), mr.Config{MTU: 1024}},
		{"none-encrypt", mr.Config{MTU: 1024}, sealedConfig(mr.SecurityEncrypt, 2)},
		{"wrong-secret", sealedConfig(mr.SecurityAuth, 1), wrong},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := newPair(c.a, c.b)
			require.NoError(t, err)
			_, _, err = p.Connect(50e6)
			require.Error(t, err)
			bc := p.EP[1].Counters()
			require.NotZero(t, bc.SealMismatch+bc.AuthFailures, "%+v", bc)
			require.Zero(t, p.EP[1].Connections())
		})
	}
}

// TestSealedConfig: the sealed modes need a secret of 16..64 bytes, a
// known key length and a random source.
func TestSealedConfig(t *testing.T) {
	ok := sealedConfig(mr.SecurityEncrypt, 1)
	for name, mut := range map[string]func(*mr.Config){
		"Security.Secret": func(c *mr.Config) { c.Security.Secret = c.Security.Secret[:8] },
		"Security.KeyLen": func(c *mr.Config) { c.Security.KeyLen = 24 },
		"Rand":            func(c *mr.Config) { c.Rand = nil },
		"Security.Mode":   func(c *mr.Config) { c.Security.Mode = 9 },
	} {
		c := ok
		mut(&c)
		_, err := mr.NewEndpoint(c)
		var ce *verbs.ConfigError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, name, ce.Field)
	}
	c := ok
	c.Security.KeyLen = 32
	_, err := mr.NewEndpoint(c)
	require.NoError(t, err)
}

func newPair(a, b mr.Config) (*mempair.Pair, error) {
	return mempair.New(a, b, memlink.Config{Delay: 2000})
}
