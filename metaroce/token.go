package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// Proof of a connection's secret (docs/protocol.md §7.6).
//
// Each end of a connection draws a 128-bit token from the endpoint's
// random source (Config.Rand) and sends it once, in its CONNECT or ACCEPT
// (the extension's token field, §5.4). From then on every unsequenced
// packet of the connection (ACK, NAK, KEEPALIVE, CLOSE, CLOSE_ACK, RESET,
// a repeated ACCEPT) carries, in its header's timestamp field, a 64-bit
// tag: SipHash-2-4, keyed by the token of the packet's receiver, over the
// packet's other bytes (the header without the tag, and the extension).
// The receiver checks it, in constant time, before it acts on anything in
// the packet, refreshes liveness or counts it as proof of the peer's
// presence; a packet whose tag fails is dropped and counted (BadTags).
//
// So an off-path sender who knows everything on the wire but the tokens
// (node ids, incarnations, both connection ids, addresses: what an
// observer of any packet but the handshake learns) must guess 64 bits to
// end a connection (RESET, CLOSE), to acknowledge data that never arrived
// or slow the sender with a rate hint (ACK), to fail a message (NAK), or
// to keep a dead peer looking alive (KEEPALIVE). The tokens also key
// every path's first PSN in every generation (isnKey), so a sequenced
// packet lands in the receiver's window with probability 2^-24 per try
// for such a sender, and with 2^-88 for one who does not know the
// connection ids either; one that would start a newer generation must
// also prove the token (genproof.go), 64 bits more.
//
// This is mode none's protection against an attacker who cannot see the
// handshake; an on-path attacker who saw it has the tokens. The AEAD
// modes (docs/security.md) protect against that one.

// Token is one end's secret of a connection.
type Token [16]byte

// TokenLen is the size of a token on the wire.
const TokenLen = 16

// newToken draws a token from r.
func newToken(r verbs.Random) Token {
	var t Token
	binary.BigEndian.PutUint64(t[0:], r.Uint64())
	binary.BigEndian.PutUint64(t[8:], r.Uint64())
	return t
}

func (t *Token) key() sipKey {
	return sipKey{binary.BigEndian.Uint64(t[0:]), binary.BigEndian.Uint64(t[8:])}
}

// tagOff is where the tag lives: the header's timestamp field, which no
// receiver reads in an unsequenced packet.
const tagOff = 24

// tagged reports whether packets with opcode op carry a tag: every
// unsequenced one but CONNECT (which has no secret to prove yet).
func (o Opcode) tagged() bool { return !o.Sequenced() && o != OpConnect }

// packetTag is the tag of pkt (header and extension, no CRC) under t.
func packetTag(pkt []byte, t *Token) uint64 {
	return sipHash24(t.key(), pkt[:tagOff], pkt[HeaderLen:])
}

// putTag writes the tag of b[:n] (header and extension, the header put
// already) under the receiver's token t; the CRC is sealed after it.
func putTag(b []byte, n int, t *Token) {
	binary.BigEndian.PutUint64(b[tagOff:], packetTag(b[:n], t))
}

// putProof writes the tag of b[:n] under the peer's token, in mode none:
// in the sealed modes (seal.go) the AEAD tag proves the packet, and more.
func (c *Conn) putProof(b []byte, n int) {
	if c.ep.sec.mode == SecurityNone {
		putTag(b, n, &c.tokRemote)
	}
}

// proofOK checks the tag of raw (header and extension) against our token.
// raw is nil for a packet that was unsealed (seal.go): its AEAD tag,
// checked already, proved it.
func (c *Conn) proofOK(raw []byte) bool { return raw == nil || tagOK(raw, &c.tokLocal) }

// tagOK checks pkt's tag (pkt: header and extension, no CRC) against our
// own token t, in constant time.
func tagOK(pkt []byte, t *Token) bool {
	want := packetTag(pkt, t)
	return eq64(want, binary.BigEndian.Uint64(pkt[tagOff:]))
}
