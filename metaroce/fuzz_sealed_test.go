package metaroce

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// FuzzEndpointReceiveSealed is FuzzEndpointReceive in the auth and
// encrypt modes (the first byte picks the mode). Each input reaches B
// three ways: as is (the seal check refuses nearly all of it); as the
// header and body of a packet that A seals under the live connection's
// keys, so that the decryption and everything behind it (state machine,
// scoreboard, placement) see it as they would a packet from the peer;
// and that sealed packet once more, which must be refused as a replay if
// the first copy opened. The memory invariants of fzEnv.check hold
// throughout.
func FuzzEndpointReceiveSealed(f *testing.F) {
	for _, p := range fzCapture(f) {
		for _, m := range []byte{0, 1} {
			f.Add(append([]byte{m}, p[:len(p)-CRCLen]...))
		}
	}
	// With FlagGenProof, which the sealed modes refuse (genproof.go).
	for _, p := range fzGenProofSeeds(f, fzNewEnv(f)) {
		for _, m := range []byte{0, 1} {
			f.Add(append([]byte{m}, p[:len(p)-CRCLen]...))
		}
	}
	f.Add([]byte{0})
	f.Add(append([]byte{1}, make([]byte, HeaderLen)...))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := fzConfig()
		cfg.Security = Security{Mode: SecurityAuth + SecurityMode(data[0]&1), Secret: []byte("fuzzing the sealed receive path")}
		cfg.Rand = verbs.NewSeededRandom(3)
		data = data[1:]
		e := fzNewEnvCfg(t, cfg)
		b := e.w.ep[1]
		rx := verbs.RxMeta{Peer: 0}
		b.Receive(e.w.now, data, rx)
		if len(data) >= HeaderLen && len(data)+SealLen+HelloLen <= b.MaxPacketLen() {
			p := make([]byte, b.MaxPacketLen()+HelloLen)
			copy(p, data)
			e.fzPatch(p)
			// The flags the sealer sets are its own.
			p[3] &^= byte(flagsSeal)
			n := e.ca.seal(e.w.now, p, len(data))
			sealed := bytes.Clone(p[:n])
			b.Receive(e.w.now, sealed, rx)
			op, path := Opcode(sealed[1]), int(sealed[17])|int(sealed[16])<<8
			if c := b.conns[e.cb.LocalID()]; c != nil && c.sec != nil && !op.headerOnlyMAC() && path < len(c.sec.rx.win) {
				pn := e.ca.sec.tx.pn[path%len(e.ca.sec.tx.pn)]
				if c.sec.rx.win[path].top == pn {
					before := c.c.Replays
					b.Receive(e.w.now, sealed, rx)
					require.Equal(t, before+1, c.c.Replays, "a replay of an opened packet was not refused")
				}
			}
		}
		e.check(t)
		e.run(300, 20e6)
		e.check(t)
	})
}

// headerOnlyMAC: the opcodes sealed with the PSK MAC, which have no
// packet number (seal.go).
func (o Opcode) headerOnlyMAC() bool { return o == OpConnect || o == OpReset || o == OpCloseAck }
