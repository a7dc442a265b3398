package rocev2

import "encoding/binary"

// Packet is a decoded RoCEv2 UDP payload:
//
//	BTH | [DETH] [RETH] [AETH] [ImmDt] | payload | pad (0-3 bytes) | ICRC
//
// which extension headers are present is fixed by the opcode (IBA 9.2,
// Table 38). Decode checks the layout only; the ICRC is checked separately
// (CheckICRC) because it needs the IP and UDP header values.
type Packet struct {
	BTH  BTH
	DETH DETH
	RETH RETH
	AETH AETH
	Imm  uint32
	// Payload aliases the decoded buffer and excludes the pad bytes. For a
	// CNP it is the 16 reserved bytes.
	Payload []byte
	ICRC    uint32
}

// HeaderLen returns the length of the headers an opcode carries (BTH and
// its extension headers), or 0 for an unknown opcode.
func HeaderLen(op Opcode) int {
	i := opTable[op]
	if !i.valid {
		return 0
	}
	n := BTHLen
	if i.deth {
		n += DETHLen
	}
	if i.reth {
		n += RETHLen
	}
	if i.aeth {
		n += AETHLen
	}
	if i.imm {
		n += ImmLen
	}
	return n
}

// Decode parses b, a whole UDP payload ICRC included. The payload must be
// padded to a multiple of four bytes with exactly PadCount pad bytes;
// opcodes without payload must have none. Decode never panics and returns
// an error for anything malformed; p.Payload aliases b.
func (p *Packet) Decode(b []byte) error {
	if err := p.BTH.Decode(b); err != nil {
		return err
	}
	op := p.BTH.Opcode
	info := opTable[op]
	hl := HeaderLen(op)
	if len(b) < hl+ICRCLen {
		return ErrShort
	}
	n := BTHLen
	if info.deth {
		_ = p.DETH.Decode(b[n:])
		n += DETHLen
	}
	if info.reth {
		_ = p.RETH.Decode(b[n:])
		n += RETHLen
	}
	if info.aeth {
		if err := p.AETH.Decode(b[n:]); err != nil {
			return err
		}
		n += AETHLen
	}
	if info.imm {
		p.Imm = binary.BigEndian.Uint32(b[n:])
		n += ImmLen
	}
	rest := b[n : len(b)-ICRCLen]
	p.ICRC = binary.LittleEndian.Uint32(b[len(b)-ICRCLen:])
	pad := int(p.BTH.PadCount)
	switch {
	case op == OpCNP:
		if len(rest) != CNPPayloadLen {
			return ErrLength
		}
		if pad != 0 {
			return ErrPad
		}
	case !info.payload:
		if len(rest) != 0 {
			return ErrLength
		}
		if pad != 0 {
			return ErrPad
		}
	default:
		if len(rest)%4 != 0 {
			return ErrLength
		}
		if pad > len(rest) {
			return ErrPad
		}
	}
	p.Payload = rest[:len(rest)-pad]
	return nil
}

// padFor returns the pad bytes that round a payload of n bytes up to a
// multiple of four.
func padFor(n int) int { return -n & 3 }
