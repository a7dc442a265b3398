package main

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/profile"
)

// perf's key exchange for security.mode auth and encrypt (docs/security.md).
// The TCP setup channel carries an ephemeral X25519 key each way, each
// authenticated with the pre-shared key of security.psk_file:
//
//	hello:   key = client's public key, proof = HMAC(psk, "metaroce perf client" | key_c)
//	welcome: key = server's public key, proof = HMAC(psk, "metaroce perf server" | key_c | key_s)
//
// Both ends then hand the core the master secret
//
//	HKDF-Extract(SHA-256, X25519(priv, peer) | psk, salt "metaroce perf v1" | key_c | key_s)
//
// from which it derives each connection's keys with the CONNECT and
// ACCEPT hellos (metaroce/keys.go). Someone without the PSK can neither
// pass as either end (the proofs) nor learn the secret from the exchange
// (X25519); a recorded session stays secret once the ephemeral keys are
// gone, even if the PSK leaks later. A replayed hello gets a welcome, but
// nothing more: its sender has no private key to finish the exchange.

// keyShare is one end's half of the exchange; nil in mode none.
type keyShare struct {
	priv *ecdh.PrivateKey
	psk  []byte
}

func newKeyShare(cfg profile.Config) (*keyShare, error) {
	if cfg.Security.SecurityMode() == 0 {
		return nil, nil
	}
	psk, err := cfg.Security.ReadPSK()
	if err != nil {
		return nil, err
	}
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return &keyShare{priv: priv, psk: psk}, nil
}

func (k *keyShare) pub() []byte { return k.priv.PublicKey().Bytes() }

func (k *keyShare) proof(label string, keys ...[]byte) []byte {
	m := hmac.New(sha256.New, k.psk)
	m.Write([]byte(label))
	for _, b := range keys {
		m.Write(b)
	}
	return m.Sum(nil)
}

// master is the exchange's outcome, from the peer's public key.
func (k *keyShare) master(peer, keyC, keyS []byte) ([]byte, error) {
	pk, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		return nil, fmt.Errorf("setup: bad X25519 key: %w", err)
	}
	shared, err := k.priv.ECDH(pk)
	if err != nil {
		return nil, fmt.Errorf("setup: X25519: %w", err)
	}
	salt := append(append([]byte("metaroce perf v1"), keyC...), keyS...)
	return hkdf.Extract(sha256.New, append(shared, k.psk...), salt)
}

var errBadProof = errors.New("setup: the peer does not hold security.psk_file's key")

// clientKey fills the hello's key and proof.
func (k *keyShare) clientKey(m *ctrlMsg) {
	if k != nil {
		m.Key = k.pub()
		m.Proof = k.proof("metaroce perf client", m.Key)
	}
}

// checkHelloKey is the server's check of a hello's key and proof.
func checkHelloKey(cfg profile.Config, hello ctrlMsg) error {
	if cfg.Security.SecurityMode() == 0 {
		if hello.Key != nil {
			return errors.New("setup: the client asks for security.mode auth or encrypt, this server runs none")
		}
		return nil
	}
	psk, err := cfg.Security.ReadPSK()
	if err != nil {
		return err
	}
	k := &keyShare{psk: psk}
	if len(hello.Key) != 32 || !hmac.Equal(hello.Proof, k.proof("metaroce perf client", hello.Key)) {
		return errBadProof
	}
	return nil
}

// serverKey answers a checked hello: it fills the welcome's key and
// proof and gives the device the master secret.
func serverKey(cfg profile.Config, n *node, hello ctrlMsg, w *ctrlMsg) error {
	k, err := newKeyShare(cfg)
	if k == nil || err != nil {
		return err
	}
	w.Key = k.pub()
	w.Proof = k.proof("metaroce perf server", hello.Key, w.Key)
	secret, err := k.master(hello.Key, hello.Key, w.Key)
	if err != nil {
		return err
	}
	return setSecret(n, secret)
}

// clientFinish checks the welcome's proof and gives the device the master
// secret.
func (k *keyShare) clientFinish(n *node, w ctrlMsg) error {
	if k == nil {
		return nil
	}
	keyC := k.pub()
	if len(w.Key) != 32 || !hmac.Equal(w.Proof, k.proof("metaroce perf server", keyC, w.Key)) {
		return errBadProof
	}
	secret, err := k.master(w.Key, keyC, w.Key)
	if err != nil {
		return err
	}
	return setSecret(n, secret)
}

func setSecret(n *node, secret []byte) error {
	s, ok := n.dev.(interface{ SetSecret([]byte) error })
	if !ok {
		return fmt.Errorf("setup: transport %s has no security modes", n.name)
	}
	return s.SetSecret(secret)
}
