package engine

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// SecureRandom returns the verbs.Random a core facing a real network is
// given (connection ids, incarnations, memory keys and addresses): every
// value is read from the operating system's cryptographic generator, so
// no value tells anything about another. It is called only when a
// connection, region or endpoint is created, never per packet.
func SecureRandom() verbs.Random { return secureRandom{} }

type secureRandom struct{}

func (secureRandom) Uint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 and later)
	return binary.LittleEndian.Uint64(b[:])
}
