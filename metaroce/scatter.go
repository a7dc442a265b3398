package metaroce

import (
	"encoding/binary"
	"fmt"

	"github.com/metaroce/metaroce/internal/crc32c"
	"github.com/metaroce/metaroce/verbs"
)

// Scatter describes a packet NextPacketScatter built without copying its
// payload: on the wire it is buf[:HdrLen], then Payload, then Trailer
// (the CRC32C of the two before it, §2 of docs/protocol.md). When Payload
// is nil the packet was built whole, as NextPacket builds it: buf[:Len]
// of the TxMeta is the packet and Trailer is unused.
type Scatter struct {
	HdrLen  int
	Payload []byte
	Trailer [CRCLen]byte
}

// scatterState is the endpoint's side of one NextPacketScatter call: the
// payload threshold and the caller's Scatter while the call runs (0 and
// nil otherwise), which writeSequenced fills for a scattered packet.
type scatterState struct {
	min int
	out *Scatter
}

// NextPacketScatter is NextPacket that hands out a data packet's payload
// instead of copying it: for a data packet whose payload is at least
// minPayload bytes (minPayload >= 1), the headers go into buf, sc.Payload
// is the payload's place in the application's registered memory (no
// copy) and sc.Trailer the 4-byte CRC32C trailer the backend must send
// after it; meta.Len is the whole packet's length, as NextPacket's. Every
// other packet (control, ACK, NOP, a payload under minPayload, and every
// packet in the sealed modes, which encipher or MAC the bytes in place)
// is written whole into buf, with sc.Payload nil. buf must hold
// MaxPacketLen bytes, as NextPacket's.
//
// Buffer ownership: sc.Payload aliases the source the application
// registered (a send's local SGE, or the memory a peer's READ reads) and
// is capped to the payload (a full slice expression: no append reaches
// past it). The backend may hold it, without copying, until its driver is
// done with the packet, under three conditions it must keep:
//
//   - The memory must stay mapped until then. Deregistering the region
//     (verbs.MemoryRegion.Deregister) only revokes its keys: later
//     packets carry none of it (revokedSource), but a packet already
//     handed out still points into it. A backend that frees region memory
//     (the DPDK engine's mempool.Region.Free) does so only after its
//     queues are drained (docs/dpdk.md: regions are freed after the
//     engine stops).
//   - The memory must be memory the driver may keep a pointer to after
//     the call that queued it returns (for cgo: C or DPDK memory, never
//     the Go heap). The core cannot tell; the backend checks.
//   - The bytes may change under a queued copy, and nothing breaks: the
//     trailer was computed when the packet was built, so a copy whose
//     payload changed before the driver read it fails its CRC at the
//     receiver and is dropped (counted as a CRC failure; the sender's loss
//     repair resends it from the memory as it is then). The application
//     may rewrite a send buffer only after its completion (IB semantics),
//     and a completion means every chunk was acknowledged, which the
//     responder does only after placing the chunk (rxwindow.go): a copy
//     still queued then is a duplicate, whose chunk exactly-once placement
//     does not place again, whether it arrives intact or (changed) is
//     dropped for its CRC. Only a packet queued before its message
//     completed can be the first to arrive, and that one the application
//     has not yet been allowed to touch.
//
// The endpoint keeps no reference to buf or sc after the call.
func (e *Endpoint) NextPacketScatter(now verbs.Time, buf []byte, minPayload int, sc *Scatter) (verbs.TxMeta, bool) {
	if minPayload < 1 {
		panic(fmt.Sprintf("metaroce: NextPacketScatter threshold %d, need >= 1", minPayload))
	}
	sc.Payload = nil
	e.scat = scatterState{min: minPayload, out: sc}
	meta, ok := e.NextPacket(now, buf)
	e.scat = scatterState{}
	return meta, ok
}

// scatterable reports whether a payload of n bytes goes out by reference
// in the NextPacketScatter call that is running, if any.
func (e *Endpoint) scatterable(n int) bool {
	return e.scat.min > 0 && n >= e.scat.min && e.sec.mode == SecurityNone
}

// scatter ends a data packet whose headers are buf[:n] without copying
// payload: the CRC32C runs over the headers and then the payload where it
// lies, and the result goes to the running NextPacketScatter call. It
// returns the packet's wire length.
func (e *Endpoint) scatter(buf []byte, n int, payload []byte) int {
	crc := crc32c.Update(crc32c.Checksum(buf[:n]), payload)
	sc := e.scat.out
	sc.HdrLen, sc.Payload = n, payload[:len(payload):len(payload)]
	binary.BigEndian.PutUint32(sc.Trailer[:], crc)
	return n + len(payload) + CRCLen
}
