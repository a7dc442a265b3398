package metaroce

// Which path generations a receiver adopts (docs/protocol.md §8.2).
//
// A sender starts a new generation of a path only by its own restarts
// (path failure, a full space of unanswered probes, a re-roll), each one
// step, each starting at the generation's first PSN, which both ends
// derive from the connection's tokens (isnKey): a value an outsider who
// lacks the tokens cannot compute. So a newer generation is adopted only
// when the packet that announces it
//
//   - is at most maxGenStep generations ahead (the receiver may have seen
//     none of the packets of a few generations: probes lost on a dead
//     path, a generation whose space filled with unanswered probes); and
//   - carries a PSN within SackBits of that generation's first PSN, where
//     every packet of a generation's first window lies.
//
//   - in mode none, proves the receiver's token in its timestamp field
//     (FlagGenProof, genproof.go); in the sealed modes its AEAD tag did.
//
// and only then does its sequenced processing go on. Anything else is
// dropped and counted (GenerationsRefused), leaving the path as it was: a
// forger who knows the connection ids and incarnation but not the tokens
// lands in the window with probability 257/2^32 (about 2^-24) per try,
// and must then guess the 64-bit proof too: 2^-88 per try. The cheap
// checks come first, so a forger's packets cost the receiver a SipHash
// only in the rare case they pass them. Even a proven packet moves the
// path by at most maxGenStep generations, which the real sender catches
// up with by its own restarts, instead of freezing it.

// maxGenStep bounds how far ahead a generation may be adopted.
const maxGenStep = 8

// inGenWindow reports whether psn lies in the first window of the
// generation whose first PSN is first.
func inGenWindow(psn, first PSN) bool {
	d := int32(psn - first)
	return d >= 0 && d <= SackBits
}

// newGeneration reports whether a packet of generation gen (newer than
// r's) at psn may restart r.
func (r *rxPath) newGeneration(gen uint16, psn PSN) bool {
	step := int16(gen - r.gen)
	return step > 0 && step <= maxGenStep && inGenWindow(psn, initialPSN(r.isn, gen))
}

// inFirstWindow reports whether h, a sequenced packet on an accepted
// connection that has no path state yet (admission.go), lies where the
// peer's first packets do: a path it agreed to, an early generation, the
// window of that generation's first PSN.
func (c *Conn) inFirstWindow(h *Header) bool {
	if int(h.Path) >= c.paths || h.PathGen > maxGenStep {
		return false
	}
	isn := isnKey(&c.tokRemote, &c.tokLocal, int(h.Path))
	return inGenWindow(h.PSN, initialPSN(isn, h.PathGen))
}
