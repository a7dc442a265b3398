package metaroce

import (
	"crypto/subtle"
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// A generation's proof (docs/protocol.md §8.2): in mode none, what it
// takes to move a path to a newer generation is the receiver's token.
//
// A newer path_gen resets the receiver's view of the path (generation.go),
// so it must not be had for the price of a sequenced packet in the
// window, which is a PSN (24 bits for an attacker who knows the
// connection ids). A sequenced packet has no spare field for a 64-bit tag
// and giving every data packet one would cost it 8 bytes; but only the
// packets of a generation the receiver has not adopted yet need one, and
// those are few: the re-probes of a failed path, the first round of a
// re-rolled one. So while a sender's path is in a generation that no ACK
// of the receiver has named yet (txPath.unproven), its sequenced packets
// carry FlagGenProof and, in the timestamp field instead of the stamp,
// the proof
//
//	SipHash-2-4(key = the receiver's token, header bytes 0..23)
//
// (the token as in token.go; the header without the field the proof is
// written in: version, opcode, flags, both connection ids, incarnation,
// path, generation, PSN). The receiver adopts a newer generation only
// from a packet whose proof checks, in constant time, after the cheap
// checks of generation.go; every other packet of a newer generation is
// dropped and counted (GenerationsRefused; BadTags too when it carried a
// proof that failed). Once the sender sees an ACK block of the new
// generation it knows the receiver is in it and stamps again.
//
// The proof covers the header, not the extension and payload: what it
// proves is that the generation comes from the holder of the token, the
// question the receiver asks; the bytes of an established generation's
// packets are no better protected in mode none (an unkeyed CRC), and
// leaving the payload out keeps the cost to 24 bytes of SipHash however
// large the packet, and lets a sender that does not hold the payload in
// its packet buffer (a scatter send) compute it.
//
// What it costs: nothing on a path in an adopted generation (one flag
// test each way). On a path proving its generation, the receiver echoes
// no stamp for the proven packets (the field holds no time), so the ACKs
// of that round give the sender no RTT sample and no spurious-timeout
// verdict: one round trip's samples per new generation. Loss detection
// goes on: the sender still records its stamps (txSlot.sentAt), and an
// ACK block with no echo uses the latest transmission it retires in the
// echo's place (onAckBlock).
//
// The sealed modes (seal.go) neither send nor need the proof: the AEAD
// tag already covers the header under a key the attacker lacks, and the
// stamp keeps its place. There the flag is refused, before the AEAD is
// tried (receiveSealed: Malformed): a sender in those modes never sets it,
// and a packet that had it would carry no stamp for nothing. On an
// unsequenced packet, whose timestamp field is its tag (token.go), the
// flag means nothing and is refused in every mode (dispatch: Malformed).
//
// Generation 0 needs no proof: both ends start in it (the connection's
// handshake proved the tokens), so txPath.unproven starts false. A packet
// of the receiver's current generation with the flag is taken as usual,
// only its stamp is not (the sender has not seen an ACK of the generation
// yet; it proves on until it does).

// genProofTag is the proof of the sequenced packet whose header is hdr
// (at least its bytes 0..23), under the receiver's token t.
func genProofTag(hdr []byte, t *Token) uint64 { return sipHash24(t.key(), hdr[:tagOff], nil) }

// needsGenProof marks h, a sequenced packet about to go out on p, as
// carrying its generation's proof if the peer has not adopted p's
// generation yet (mode none only).
func (c *Conn) needsGenProof(p *txPath, h *Header) {
	if p.unproven && c.ep.sec.mode == SecurityNone {
		h.Flags |= FlagGenProof
	}
}

// putGenProof writes the proof into b, whose header is put already, if
// its flags ask for one. Every (re)transmission of a sequenced packet
// goes through here (writeSequenced), so resends and re-probes of an
// unproven path prove as its first packets do.
func (c *Conn) putGenProof(b []byte, flags HeaderFlags) {
	if flags&FlagGenProof != 0 {
		binary.BigEndian.PutUint64(b[tagOff:], genProofTag(b, &c.tokRemote))
	}
}

// genProofOK reports whether the sequenced packet h, which names a newer
// generation of its path, proves our token, as such a packet must. raw is
// what receive got: in mode none the packet as received without its CRC
// (header and body; the proof covers raw[:24]); nil in the sealed modes,
// where the AEAD tag over the header proved it already (and FlagGenProof
// was refused). A proof that fails is counted (BadTags).
func (c *Conn) genProofOK(h *Header, raw []byte) bool {
	if raw == nil {
		return true
	}
	if h.Flags&FlagGenProof == 0 || len(raw) < HeaderLen {
		return false
	}
	if eq64(genProofTag(raw, &c.tokLocal), uint64(h.Timestamp)) {
		return true
	}
	c.c.BadTags++
	return false
}

// eq64 compares a and b in constant time: a forger learns nothing of a
// proof from how long its refusal took.
func eq64(a, b uint64) bool {
	d := a ^ b
	return subtle.ConstantTimeEq(int32(uint32(d)|uint32(d>>32)), 0) == 1
}

// stamp is the sender's stamp a sequenced packet carries, or 0 when its
// timestamp field holds a generation's proof: never an RTT sample, a
// one-way delay or an echo. Everything that reads a received sequenced
// packet's time reads it through here.
func (h *Header) stamp() verbs.Time {
	if h.Flags&FlagGenProof != 0 {
		return 0
	}
	return h.Timestamp
}
