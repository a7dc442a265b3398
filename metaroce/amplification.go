package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Anti-amplification (docs/protocol.md §7.2): until an inbound
// connection's peer has proven it receives at its address (it showed our
// token, which only our ACCEPT to that address carried: a tagged packet,
// or a sequenced one in a first window, admission.go), the connection
// sends that address at most ampFactor times the bytes it received from
// it, as QUIC's servers do (RFC 9000 §8.1). A CONNECT with a spoofed
// source thus turns into at most three times its size towards the victim,
// however many ACCEPTs, keepalives or data packets the connection would
// otherwise send; the application's own posts on an unproven connection
// wait for the proof like the rest.
//
// The bytes received count every packet from the peer's address that
// names the connection (its CONNECTs, repeats included, and whatever
// else arrives, proven or not): what the sender spent is what it may get
// back, times three.

// proveDelay is how long an initiator that has sent no sequenced packet
// since the ACCEPT waits before it proves itself with a tagged ACK of no
// blocks (what answers a KEEPALIVE): an acceptor that speaks first may
// send it only three times what it sent, until a packet of its shows the
// token. An initiator that sends first proves itself with its first
// packet, and sends no extra one: at the start of an incast, a packet
// more per sender would join the first burst.
const proveDelay = 20 * time.Microsecond

// proveIfSilent queues that ACK once proveDelay has passed without a
// sequenced packet of ours (Conn.onTimer).
func (c *Conn) proveIfSilent(now verbs.Time) {
	if c.proveAt != 0 && now >= c.proveAt {
		c.proveAt = 0
		c.queueCtrl(ctrlPkt{op: OpAck})
	}
}

// ampFactor is the multiple of the received bytes an unproven peer may be
// sent.
const ampFactor = 3

// ampBudget counts one unproven connection's bytes.
type ampBudget struct {
	rx, tx uint64
}

// allows reports whether n more bytes may be sent.
func (a *ampBudget) allows(n int) bool { return a.tx+uint64(n) <= ampFactor*a.rx }

// ctrlLen is the size of the control packet op, the bound produce checks
// before building it.
func ctrlLen(op Opcode) int {
	switch op {
	case OpConnect, OpAccept:
		return HeaderLen + ConnectLen + CRCLen
	case OpAck:
		return HeaderLen + AckPrefixLen + CRCLen
	case OpNak:
		return HeaderLen + NakLen + CRCLen
	}
	return HeaderLen + CRCLen
}

// ampBound bounds the size of the connection's next packet.
func (c *Conn) ampBound() int {
	if c.ctrl.Len() > 0 {
		return ctrlLen(c.ctrl.Front().op)
	}
	return c.ep.MaxPacketLen()
}

// produceUnproven is produce for a half-open connection: the next packet
// goes only if it fits the budget (a packet other than a control one is
// bounded by MaxPacketLen). Held packets wait for more bytes from the
// peer or for its proof, each of which touches the connection.
func (c *Conn) produceUnproven(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if !c.amp.allows(c.ampBound()) {
		c.c.AmplificationHeld++
		return verbs.TxMeta{}, false
	}
	meta, ok := c.produceNext(now, buf)
	if ok {
		c.amp.tx += uint64(meta.Len)
	}
	return meta, ok
}
