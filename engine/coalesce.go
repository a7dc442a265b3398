package engine

import "github.com/metaroce/metaroce/verbs"

// Coalescer is a transport core that can append packets to a datagram it
// has just built (metaroce.Endpoint.NextCoalesced; metaroce/coalesce.go
// says which packets and why). The RoCEv2 baseline is not one: its wire
// has no such form.
type Coalescer interface {
	NextCoalesced(now verbs.Time, dgram []byte, n int) (verbs.TxMeta, bool)
}

// AutoCoalesce is the most packets per datagram a backend's coalesce
// setting of 0 means (dpdk.coalesce, udp.coalesce).
const AutoCoalesce = 8

// Coalesce appends follow-ons to the datagram the core has just written
// at the start of dgram (meta), until it holds max packets or the core
// has nothing more for it, and returns the datagram's TxMeta and the
// packets appended. One call into the core per follow-on, and one more
// that finds nothing when the datagram is not full.
func Coalesce(c Coalescer, now verbs.Time, dgram []byte, meta verbs.TxMeta, max int) (verbs.TxMeta, int) {
	k := 0
	for ; k+1 < max; k++ {
		more, ok := c.NextCoalesced(now, dgram, meta.Len)
		if !ok {
			break
		}
		meta = more
	}
	return meta, k
}
