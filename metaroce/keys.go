package metaroce

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// The key schedule of the auth and encrypt modes (docs/protocol.md §17,
// docs/security.md). Every key follows from Security.Secret, a secret
// both ends share before the connection exists (the CLI derives it from
// an X25519 exchange on its TCP setup channel authenticated with a
// pre-shared key; the verbs library from the pre-shared key alone), and
// from the two random values CONNECT and ACCEPT carry:
//
//	hs        = HKDF(SHA-256, Secret, salt "metaroce v1 handshake", "psk-mac", 32)
//	prk       = HKDF-Extract(SHA-256, Secret, salt = "metaroce v1 " | hello_i | hello_a)
//	ts[d][0]  = HKDF-Expand(prk, "traffic " | d | mode | key length | conn_i | conn_a | inc_i | inc_a, 32)
//	key[d][e] = HKDF-Expand(ts[d][e], "key", KeyLen)
//	ts[d][e+1]= HKDF-Expand(ts[d][e], "next", 32)
//
// where d is the direction ("i2a": initiator to acceptor, "a2i"), e the
// key epoch, hello_i and hello_a the initiator's and the acceptor's random
// values, conn_* their connection ids and inc_* their incarnations. Two
// connections never share a key as long as one of the hello values is
// fresh; each direction has its own key, so the two ends never seal under
// the same key either. The core never reads files or OS randomness: the
// secret comes in Config.Security, the hellos from Config.Rand.

// SecurityMode selects what protects a packet.
type SecurityMode uint8

// The modes. None is the interoperable default (the CRC32C trailer, as
// version 1 always had); Auth appends an AES-GCM tag over the whole
// packet; Encrypt also enciphers everything after the common header.
const (
	SecurityNone SecurityMode = iota
	SecurityAuth
	SecurityEncrypt
)

func (m SecurityMode) String() string {
	switch m {
	case SecurityNone:
		return "none"
	case SecurityAuth:
		return "auth"
	case SecurityEncrypt:
		return "encrypt"
	}
	return "invalid"
}

// Security configures the auth and encrypt modes. Its fields are the
// program's to set (the profile's security.* keys, read by the CLI and the
// verbs library); the zero value is mode none.
type Security struct {
	Mode SecurityMode
	// Secret is the master secret every key follows from (16..64 bytes);
	// required in auth and encrypt. Endpoint.SetSecret replaces it for
	// connections set up afterwards.
	Secret []byte
	// KeyLen is 16 (AES-128-GCM) or 32 (AES-256-GCM). Default 16.
	KeyLen int
	// RekeyPackets: a sender moves its direction to the next key epoch
	// after sealing this many packets under one key (and at least
	// 2 × KeyHold after its previous move). Default 2^23, QUIC's
	// confidentiality limit for AES-GCM.
	RekeyPackets uint64
	// KeyHold is how long a receiver keeps the previous epoch's key after
	// the first packet under the next one, for packets still on the way.
	// Default 250ms.
	KeyHold time.Duration
}

func (s Security) defaults() Security {
	if s.KeyLen == 0 {
		s.KeyLen = 16
	}
	if s.RekeyPackets == 0 {
		s.RekeyPackets = 1 << 23
	}
	if s.KeyHold == 0 {
		s.KeyHold = 250 * time.Millisecond
	}
	return s
}

func (s Security) validate(rand verbs.Random) error {
	switch s.Mode {
	case SecurityNone:
		return nil
	case SecurityAuth, SecurityEncrypt:
	default:
		return cfgErr("Security.Mode", "= %d, want none, auth or encrypt", s.Mode)
	}
	if len(s.Secret) < 16 || len(s.Secret) > 64 {
		return cfgErr("Security.Secret", "is %d bytes, want 16..64", len(s.Secret))
	}
	if s.KeyLen != 16 && s.KeyLen != 32 {
		return cfgErr("Security.KeyLen", "= %d, want 16 (AES-128-GCM) or 32 (AES-256-GCM)", s.KeyLen)
	}
	if s.KeyHold <= 0 {
		return cfgErr("Security.KeyHold", "= %v, want > 0", s.KeyHold)
	}
	if rand == nil {
		// The hellos must never repeat under one secret: a seeded source
		// would repeat them after a restart, and with them the nonces.
		return cfgErr("Rand", "is nil: auth and encrypt need a random source that never repeats (engine.SecureRandom)")
	}
	return nil
}

// HelloLen is the size of the random value CONNECT and ACCEPT carry in
// the auth and encrypt modes.
const HelloLen = 16

// hsMAC is the endpoint's PSK MAC: HMAC-SHA-256 under the handshake key,
// truncated to TagLen, for the packets sealed before or outside any
// connection (CONNECT, RESET, CLOSE_ACK). One per endpoint, reset for
// every use: it allocates nothing per packet.
type hsMAC struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

func newHSMAC(secret []byte) (*hsMAC, error) {
	k, err := hkdf.Key(sha256.New, secret, []byte("metaroce v1 handshake"), "psk-mac", 32)
	if err != nil {
		return nil, err
	}
	return &hsMAC{h: hmac.New(sha256.New, k)}, nil
}

// mac returns the tag of b (valid until the next call).
func (m *hsMAC) mac(b []byte) []byte {
	m.h.Reset()
	m.h.Write(b)
	return m.h.Sum(m.sum[:0])[:TagLen]
}

// trafficSecret is the secret of one direction in one epoch.
type trafficSecret [32]byte

// connSecrets derives both directions' epoch-0 secrets of a connection.
func connSecrets(s *Security, helloI, helloA []byte, connI, connA ConnID, incI, incA Incarnation) (i2a, a2i trafficSecret, err error) {
	salt := make([]byte, 0, 12+2*HelloLen)
	salt = append(salt, "metaroce v1 "...)
	salt = append(salt, helloI...)
	salt = append(salt, helloA...)
	prk, err := hkdf.Extract(sha256.New, s.Secret, salt)
	if err != nil {
		return i2a, a2i, err
	}
	for _, d := range []struct {
		dir string
		out *trafficSecret
	}{{"i2a", &i2a}, {"a2i", &a2i}} {
		info := make([]byte, 0, 40)
		info = append(info, "traffic "...)
		info = append(info, d.dir...)
		info = append(info, byte(s.Mode), byte(s.KeyLen))
		info = binary.BigEndian.AppendUint32(info, uint32(connI))
		info = binary.BigEndian.AppendUint32(info, uint32(connA))
		info = binary.BigEndian.AppendUint32(info, uint32(incI))
		info = binary.BigEndian.AppendUint32(info, uint32(incA))
		b, err := hkdf.Expand(sha256.New, prk, string(info), 32)
		if err != nil {
			return i2a, a2i, err
		}
		copy(d.out[:], b)
	}
	return i2a, a2i, nil
}

// next is the following epoch's secret.
func (t *trafficSecret) next() trafficSecret {
	var n trafficSecret
	b, _ := hkdf.Expand(sha256.New, t[:], "next", 32)
	copy(n[:], b)
	return n
}

// aead builds the AES-GCM instance of the secret's key. It allocates: it
// runs at setup and at a key update, never per packet.
func (t *trafficSecret) aead(keyLen int) cipher.AEAD {
	k, _ := hkdf.Expand(sha256.New, t[:], "key", keyLen)
	b, err := aes.NewCipher(k)
	if err != nil {
		panic(err) // keyLen is 16 or 32 (Security.validate)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}
