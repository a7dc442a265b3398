package metaroce

import (
	"crypto/cipher"
	"crypto/hmac"
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// Sealing and opening packets in the auth and encrypt modes
// (docs/protocol.md §17). In mode none a packet ends in its CRC32C, as
// version 1 always did. Otherwise the CRC is not computed (the tag covers
// every byte it would) and a packet ends in one of two seals:
//
//   - Under its connection's keys (every packet a connection sends but
//     CONNECT): AES-GCM over the whole packet, then the packet number:
//
//     header | body (enciphered in encrypt) | tag (16) | pn (8) [| hello (16), ACCEPT only]
//
//     In auth the body is additional data with the header (GCM of an empty
//     plaintext, i.e. GMAC); in encrypt the header is the additional data
//     and the body (extension and payload) the plaintext. The nonce is
//     direction (1 byte) | 0 | path_id (2) | pn (8): pn counts the packets
//     one direction sent on one path (from 1, never reset, across key
//     epochs too), so no nonce repeats under one key, whatever a
//     retransmission carries: a resend of a PSN is a new packet with a new
//     pn. The receiver keeps, per path, the highest pn and a bitmap of the
//     replayWords×64 below it (the fabric keeps a path in order, so this
//     needs no room for cross-path reordering): a pn seen before, or below
//     the bitmap, is a replay and refused before any work, and only a
//     packet whose tag checks marks its pn.
//
//   - Under the endpoint's PSK MAC (packets sent before or outside any
//     connection: CONNECT, RESET, CLOSE_ACK): HMAC-SHA-256 under the
//     handshake key, truncated to 16 bytes, over everything before it:
//
//     header | body [| hello (16), CONNECT only] | mac (16)
//
// Every sealed packet has FlagSealed, encrypt's also FlagEncrypted, and
// FlagKeyPhase says which of two key epochs sealed a connection packet.

// TagLen is the size of an AES-GCM tag and of the truncated PSK MAC.
const TagLen = 16

// PNLen is the size of the packet number after the tag.
const PNLen = 8

// SealLen is the trailer of a packet sealed under its connection's keys.
const SealLen = TagLen + PNLen

// Header flags of the sealed modes.
const (
	// FlagSealed: the packet ends in a seal, not a CRC32C.
	FlagSealed HeaderFlags = 1 << 2
	// FlagEncrypted: the body is enciphered (mode encrypt).
	FlagEncrypted HeaderFlags = 1 << 3
	// FlagKeyPhase: the low bit of the sender's key epoch.
	FlagKeyPhase HeaderFlags = 1 << 4
	flagsSeal                = FlagSealed | FlagEncrypted | FlagKeyPhase
)

// replayWords is the per-path replay bitmap in 64-bit words: pns up to
// (replayWords−1)·64 below the highest are tracked exactly.
const replayWords = 8

// The two directions of a connection, as the nonce's first byte.
const (
	dirI2A byte = 0 // initiator to acceptor
	dirA2I byte = 1
)

// endpointSec is the endpoint's part of the sealed modes.
type endpointSec struct {
	mode      SecurityMode
	cfg       Security
	mac       *hsMAC
	trailer   int    // bytes after the body: CRCLen or SealLen
	scratch   []byte // deciphered bodies (Receive must not write the caller's packet)
	peerHello [HelloLen]byte
}

func (e *Endpoint) initSecurity() error {
	s := e.cfg.Security.defaults()
	e.cfg.Security = s
	e.sec = endpointSec{mode: s.Mode, cfg: s, trailer: CRCLen}
	if s.Mode == SecurityNone {
		return nil
	}
	e.sec.trailer = SealLen
	e.sec.scratch = make([]byte, HeaderLen+MaxMsgHeaderLen+e.cfg.MTU+SealLen)
	return e.SetSecret(s.Secret)
}

// SetSecret replaces the master secret (Security.Secret) for connections
// set up from now on; established ones keep their keys. The CLI calls it
// once its setup channel's key exchange is done.
func (e *Endpoint) SetSecret(secret []byte) error {
	if e.sec.mode == SecurityNone {
		return cfgErr("Security.Mode", "is none: there is no secret to set")
	}
	if len(secret) < 16 || len(secret) > 64 {
		return cfgErr("Security.Secret", "is %d bytes, want 16..64", len(secret))
	}
	m, err := newHSMAC(secret)
	if err != nil {
		return err
	}
	e.sec.cfg.Secret = append([]byte(nil), secret...)
	e.cfg.Security.Secret = e.sec.cfg.Secret
	e.sec.mac = m
	return nil
}

// connSec is a connection's part: its hello and, once derived, its keys.
type connSec struct {
	hello [HelloLen]byte
	keyed bool
	tx    sealer
	rx    opener
}

// sealer is one direction's sending state.
type sealer struct {
	aead   cipher.AEAD
	secret trafficSecret
	phase  bool       // FlagKeyPhase of the current epoch
	sealed uint64     // packets sealed under the current key
	since  verbs.Time // when the current epoch began
	pn     []uint64   // per path: the last packet number used
	dir    byte
	nonce  [12]byte
}

// opener is the other direction's receiving state.
type opener struct {
	cur, prev, next cipher.AEAD
	nextSecret      trafficSecret // the secret of next, from which the one after follows
	phase           bool          // FlagKeyPhase of cur
	prevUntil       verbs.Time    // prev opens packets of the other phase until then
	win             []replayWindow
	dir             byte
	nonce           [12]byte
}

// replayWindow is one path's record of the packet numbers received.
type replayWindow struct {
	top  uint64 // the highest pn accepted; 0: none yet
	bits [replayWords]uint64
}

type replayVerdict uint8

const (
	pnFresh replayVerdict = iota
	pnSeen                // inside the window, received before
	pnOld                 // below the window: cannot be told from a replay
)

func (w *replayWindow) check(pn uint64) replayVerdict {
	switch {
	case pn > w.top:
		return pnFresh
	case pn == 0 || w.top/64-pn/64 >= replayWords:
		return pnOld
	case w.bits[(pn/64)%replayWords]&(1<<(pn%64)) != 0:
		return pnSeen
	}
	return pnFresh
}

// mark records pn, whose packet's tag checked.
func (w *replayWindow) mark(pn uint64) {
	if pn > w.top {
		cur, nw := w.top/64, pn/64
		if nw-cur >= replayWords {
			w.bits = [replayWords]uint64{}
		} else {
			for i := cur + 1; i <= nw; i++ {
				w.bits[i%replayWords] = 0
			}
		}
		w.top = pn
	}
	w.bits[(pn/64)%replayWords] |= 1 << (pn % 64)
}

// install derives both directions' keys. initiator says which end c is.
func (s *connSec) install(e *Endpoint, now verbs.Time, helloI, helloA []byte, connI, connA ConnID, incI, incA Incarnation, initiator bool) error {
	i2a, a2i, err := connSecrets(&e.sec.cfg, helloI, helloA, connI, connA, incI, incA)
	if err != nil {
		return err
	}
	txs, rxs, txd, rxd := i2a, a2i, dirI2A, dirA2I
	if !initiator {
		txs, rxs, txd, rxd = a2i, i2a, dirA2I, dirI2A
	}
	kl := e.sec.cfg.KeyLen
	s.tx = sealer{aead: txs.aead(kl), secret: txs, since: now, pn: make([]uint64, e.cfg.Paths), dir: txd}
	ns := rxs.next()
	s.rx = opener{cur: rxs.aead(kl), next: ns.aead(kl), nextSecret: ns, win: make([]replayWindow, e.cfg.Paths), dir: rxd}
	s.keyed = true
	return nil
}

// hello returns c's security state, drawing its hello on first use.
func (c *Conn) helloState() *connSec {
	if c.sec == nil {
		c.sec = &connSec{}
		for i := 0; i < HelloLen; i += 8 {
			binary.BigEndian.PutUint64(c.sec.hello[i:], c.ep.rand.Uint64())
		}
	}
	return c.sec
}

// keyAccepted gives a connection just accepted its keys, from the
// initiator's hello in the CONNECT being answered (Endpoint.peerHello).
func (e *Endpoint) keyAccepted(now verbs.Time, c *Conn) {
	if e.sec.mode == SecurityNone {
		return
	}
	s := c.helloState()
	if err := s.install(e, now, e.sec.peerHello[:], s.hello[:], c.remote, c.local, c.peerInc, e.cfg.Incarnation, false); err != nil {
		panic(err) // the secret was validated; HKDF of 32 bytes cannot fail
	}
}

// seal ends a packet of n bytes that c wrote into buf and returns its
// length: the CRC32C in mode none, else the PSK MAC (CONNECT) or the
// connection's seal.
func (c *Conn) seal(now verbs.Time, buf []byte, n int) int {
	e := c.ep
	if e.sec.mode == SecurityNone {
		return SealCRC(buf, n)
	}
	op := Opcode(buf[1])
	s := c.helloState()
	if op == OpConnect {
		n += copy(buf[n:], s.hello[:])
		return e.sealMAC(buf, n)
	}
	if !s.keyed {
		panic("metaroce: sealing " + op.String() + " without keys")
	}
	n = s.tx.seal(e, c, now, buf, n)
	if op == OpAccept {
		n += copy(buf[n:], s.hello[:])
	}
	return n
}

// sealReply ends an endpoint reply (RESET, CLOSE_ACK) of n bytes.
func (e *Endpoint) sealReply(buf []byte, n int) int {
	if e.sec.mode == SecurityNone {
		return SealCRC(buf, n)
	}
	return e.sealMAC(buf, n)
}

func (e *Endpoint) sealMAC(buf []byte, n int) int {
	e.setSealFlags(buf, false)
	return n + copy(buf[n:], e.sec.mac.mac(buf[:n]))
}

func (e *Endpoint) setSealFlags(buf []byte, phase bool) {
	f := HeaderFlags(binary.BigEndian.Uint16(buf[2:])) | FlagSealed
	if e.sec.mode == SecurityEncrypt {
		f |= FlagEncrypted
	}
	if phase {
		f |= FlagKeyPhase
	}
	binary.BigEndian.PutUint16(buf[2:], uint16(f))
}

func (s *sealer) seal(e *Endpoint, c *Conn, now verbs.Time, buf []byte, n int) int {
	cfg := &e.sec.cfg
	if s.sealed >= cfg.RekeyPackets && now.Sub(s.since) >= 2*cfg.KeyHold {
		// The next epoch (allocates: once per RekeyPackets packets). The
		// 2 × KeyHold spacing lets the receiver drop the key before last
		// before this phase bit comes round again.
		s.secret = s.secret.next()
		s.aead = s.secret.aead(cfg.KeyLen)
		s.phase, s.sealed, s.since = !s.phase, 0, now
		c.c.KeyUpdates++
	}
	s.sealed++
	path := binary.BigEndian.Uint16(buf[16:])
	i := int(path) % len(s.pn)
	s.pn[i]++
	pn := s.pn[i]
	e.setSealFlags(buf, s.phase)
	s.nonce[0] = s.dir
	binary.BigEndian.PutUint16(s.nonce[2:], path)
	binary.BigEndian.PutUint64(s.nonce[4:], pn)
	if e.sec.mode == SecurityEncrypt {
		s.aead.Seal(buf[HeaderLen:HeaderLen], s.nonce[:], buf[HeaderLen:n], buf[:HeaderLen])
	} else {
		s.aead.Seal(buf[n:n], s.nonce[:], nil, buf[:n])
	}
	n += TagLen
	binary.BigEndian.PutUint64(buf[n:], pn)
	return n + PNLen
}

// receiveSealed is Receive in the auth and encrypt modes: the seal is
// checked before any other field is trusted, then the packet goes the
// way of every packet (dispatch).
func (e *Endpoint) receiveSealed(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	var h Header
	if h.decode(pkt, flagsKnown&^FlagGenProof|flagsSeal) != nil {
		// FlagGenProof is mode none's (genproof.go): no sealed sender
		// sets it.
		e.c.Malformed++
		return
	}
	if h.Flags&FlagSealed == 0 || (h.Flags&FlagEncrypted != 0) != (e.sec.mode == SecurityEncrypt) {
		e.c.SealMismatch++
		return
	}
	var body []byte
	var c *Conn
	switch h.Opcode {
	case OpConnect, OpReset, OpCloseAck:
		n := len(pkt) - TagLen
		if n < HeaderLen || !hmac.Equal(e.sec.mac.mac(pkt[:n]), pkt[n:]) {
			e.c.AuthFailures++
			if c := e.conns[h.DstConn]; c != nil && h.Opcode != OpConnect {
				c.c.AuthFailures++
			}
			return
		}
		body = pkt[HeaderLen:n]
		if h.Opcode == OpConnect {
			if len(body) < HelloLen {
				e.c.Malformed++
				return
			}
			copy(e.sec.peerHello[:], body[len(body)-HelloLen:])
			body = body[:len(body)-HelloLen]
		}
	default:
		if len(pkt) < HeaderLen+SealLen {
			// Too short to be sealed; and answering it (a 48-byte RESET)
			// would send more than it brought.
			e.c.Malformed++
			return
		}
		if c = e.conns[h.DstConn]; c == nil {
			// Unauthenticated: answered as in mode none (a RESET no
			// larger than the packet, rate-limited), never acted on.
			e.dispatch(now, &h, nil, nil, rx, nil, len(pkt))
			return
		}
		var ok bool
		if body, ok = c.open(now, &h, pkt, rx); !ok {
			return
		}
	}
	h.Flags &^= flagsSeal
	e.dispatch(now, &h, nil, body, rx, c, len(pkt))
}

// open checks a packet sealed under c's keys and returns its body
// (deciphered in encrypt mode, into the endpoint's scratch buffer). What
// fails is counted on c. An initiator still connecting derives its keys
// from an ACCEPT and keeps them only if that ACCEPT's tag checks.
func (c *Conn) open(now verbs.Time, h *Header, pkt []byte, rx verbs.RxMeta) ([]byte, bool) {
	end := len(pkt)
	var hello []byte
	if h.Opcode == OpAccept {
		end -= HelloLen
		if end >= 0 {
			hello = pkt[end:]
		}
	}
	if end < HeaderLen+SealLen {
		c.c.Malformed++
		return nil, false
	}
	s := c.sec
	if s == nil || !s.keyed {
		if s == nil || c.state != connConnecting || hello == nil || h.SrcConn == 0 || rx.Peer != c.peer {
			c.c.AuthFailures++
			return nil, false
		}
		e := c.ep
		cand := &connSec{hello: s.hello}
		if err := cand.install(e, now, s.hello[:], hello, c.local, h.SrcConn, e.cfg.Incarnation, h.Incarnation, true); err != nil {
			c.c.AuthFailures++
			return nil, false
		}
		body, ok := cand.rx.open(c, now, h, pkt, end)
		if ok {
			c.sec = cand
		}
		return body, ok
	}
	return s.rx.open(c, now, h, pkt, end)
}

func (o *opener) open(c *Conn, now verbs.Time, h *Header, pkt []byte, end int) ([]byte, bool) {
	e := c.ep
	path := int(h.Path)
	if path >= len(o.win) {
		c.c.AuthFailures++
		return nil, false
	}
	pn := binary.BigEndian.Uint64(pkt[end-PNLen:])
	w := &o.win[path]
	switch w.check(pn) {
	case pnSeen:
		c.c.Replays++
		return nil, false
	case pnOld:
		c.c.ReplaysOld++
		return nil, false
	}
	o.nonce[0] = o.dir
	binary.BigEndian.PutUint16(o.nonce[2:], uint16(path))
	binary.BigEndian.PutUint64(o.nonce[4:], pn)
	var body []byte
	ok, promote := false, false
	if (h.Flags&FlagKeyPhase != 0) == o.phase {
		body, ok = o.try(e, o.cur, pkt, end)
	} else {
		// The other phase: the previous epoch's key while it is held,
		// else (or if that fails: a sender that moved on again sooner
		// than this end's KeyHold expects) the next one.
		if o.prev != nil && now < o.prevUntil {
			body, ok = o.try(e, o.prev, pkt, end)
		}
		if !ok {
			body, ok = o.try(e, o.next, pkt, end)
			promote = ok
		}
	}
	if !ok {
		c.c.AuthFailures++
		return nil, false
	}
	w.mark(pn)
	if promote {
		// The peer moved to its next epoch: keep the key before for
		// KeyHold, for its packets still on the way (allocates, once
		// per epoch).
		kl := e.sec.cfg.KeyLen
		o.prev, o.cur, o.phase = o.cur, o.next, !o.phase
		o.prevUntil = now.Add(e.sec.cfg.KeyHold)
		o.nextSecret = o.nextSecret.next()
		o.next = o.nextSecret.aead(kl)
		c.c.KeyUpdates++
	}
	return body, true
}

// try opens the packet under aead with the nonce in o.nonce.
func (o *opener) try(e *Endpoint, aead cipher.AEAD, pkt []byte, end int) ([]byte, bool) {
	tagEnd := end - PNLen
	if e.sec.mode == SecurityEncrypt {
		body, err := aead.Open(e.sec.scratch[:0], o.nonce[:], pkt[HeaderLen:tagEnd], pkt[:HeaderLen])
		return body, err == nil
	}
	_, err := aead.Open(e.sec.scratch[:0], o.nonce[:], pkt[tagEnd-TagLen:tagEnd], pkt[:tagEnd-TagLen])
	return pkt[HeaderLen : tagEnd-TagLen], err == nil
}
