package profile

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
)

// Security is the profile's security section: the metaroce transport's
// packet protection (docs/security.md, docs/protocol.md §17). Mode none
// (the default) keeps the interoperable CRC32C; auth and encrypt seal every
// packet with AES-GCM under per-connection keys that follow from the
// pre-shared key in PSKFile (through perf's X25519 exchange in the CLI,
// directly in the verbs library).
type Security struct {
	// Mode is none, auth or encrypt.
	Mode string `key:"mode"`
	// Cipher is aes-128-gcm or aes-256-gcm.
	Cipher string `key:"cipher"`
	// PSKFile names the file holding the pre-shared key (at least 16
	// bytes; surrounding white space is not part of it). Required in auth
	// and encrypt; a relative name is relative to the working directory.
	PSKFile string `key:"psk_file"`
	// RekeyPackets: packets sealed under one key before the sender moves
	// to the next epoch (0: the core's default, 2^23).
	RekeyPackets int `key:"rekey_packets"`
	// KeyHold: how long a receiver keeps the previous epoch's key (0: the
	// core's default, 250ms).
	KeyHold time.Duration `key:"key_hold"`
}

// SecurityMode is the core's mode for s.Mode (validated).
func (s Security) SecurityMode() mr.SecurityMode {
	switch s.Mode {
	case "auth":
		return mr.SecurityAuth
	case "encrypt":
		return mr.SecurityEncrypt
	}
	return mr.SecurityNone
}

// Core returns the core's Security without its secret: the caller derives
// that (perf's key exchange, or the library's ReadPSK) and sets it.
func (s Security) Core() mr.Security {
	kl := 16
	if s.Cipher == "aes-256-gcm" {
		kl = 32
	}
	return mr.Security{Mode: s.SecurityMode(), KeyLen: kl, RekeyPackets: uint64(s.RekeyPackets), KeyHold: s.KeyHold}
}

// ReadPSK reads the pre-shared key from PSKFile. An error names the key
// security.psk_file (the caller adds the profile's file).
func (s Security) ReadPSK() ([]byte, error) {
	b, err := os.ReadFile(s.PSKFile)
	if err != nil {
		return nil, bad("security.psk_file", "%v", err)
	}
	k := []byte(strings.TrimSpace(string(b)))
	if len(k) < 16 {
		return nil, bad("security.psk_file", "%s holds %d bytes, want at least 16", s.PSKFile, len(k))
	}
	return k, nil
}

func (s Security) validate(t Transport) error {
	switch s.Mode {
	case "none", "auth", "encrypt":
	default:
		return bad("security.mode", "%q is not none, auth or encrypt", s.Mode)
	}
	switch s.Cipher {
	case "aes-128-gcm", "aes-256-gcm":
	default:
		return bad("security.cipher", "%q is not aes-128-gcm or aes-256-gcm", s.Cipher)
	}
	if s.RekeyPackets < 0 {
		return bad("security.rekey_packets", "%d is negative", s.RekeyPackets)
	}
	if s.KeyHold < 0 {
		return bad("security.key_hold", "%v is negative", s.KeyHold)
	}
	if s.Mode == "none" {
		return nil
	}
	if t != TransportMetaroce {
		return bad("security.mode", "%s needs transport metaroce (the RoCEv2 baseline keeps RoCEv2's unauthenticated packets)", s.Mode)
	}
	if s.PSKFile == "" {
		return bad("security.psk_file", "is empty: security.mode %s needs a pre-shared key", s.Mode)
	}
	_, err := s.ReadPSK()
	return err
}

// String is the mode as the banner shows it.
func (s Security) String() string {
	if s.Mode == "none" {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", s.Mode, s.Cipher)
}

// Secret is the master secret the core starts from: HKDF of the
// pre-shared key (the verbs library's, for good; perf replaces it with
// the outcome of its X25519 exchange before it connects).
func (s Security) Secret() ([]byte, error) {
	psk, err := s.ReadPSK()
	if err != nil {
		return nil, err
	}
	return hkdf.Key(sha256.New, psk, []byte("metaroce v1 psk"), "master secret", 32)
}
