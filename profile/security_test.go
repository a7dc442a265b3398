package profile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	mr "github.com/metaroce/metaroce/metaroce"
)

// TestSecurityKeys: each bad security.* value is refused naming its key;
// a good profile gives the core its mode, key length and a 32-byte secret.
func TestSecurityKeys(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "psk"), filepath.Join(dir, "short")
	if err := os.WriteFile(good, []byte("  sixteen bytes or more \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	for key, mut := range map[string]func(*Config){
		"security.mode":          func(c *Config) { c.Security.Mode = "secret" },
		"security.cipher":        func(c *Config) { c.Security.Cipher = "rot13" },
		"security.psk_file":      func(c *Config) { c.Security.Mode, c.Security.PSKFile = "auth", short },
		"security.rekey_packets": func(c *Config) { c.Security.RekeyPackets = -1 },
		"security.key_hold":      func(c *Config) { c.Security.KeyHold = -1 },
	} {
		c := Default()
		mut(&c)
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Key != key {
			t.Errorf("%s: got %v", key, err)
		}
	}
	c := Default()
	c.Security.Mode, c.Security.Cipher, c.Security.PSKFile = "encrypt", "aes-256-gcm", good
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Security.Core()
	if s.Mode != mr.SecurityEncrypt || s.KeyLen != 32 {
		t.Fatalf("core security %+v", s)
	}
	secret, err := c.Security.Secret()
	if err != nil || len(secret) != 32 {
		t.Fatalf("secret %d bytes, %v", len(secret), err)
	}
	c.Transport = TransportRoCEv2
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Key != "security.mode" {
		t.Fatalf("rocev2 with encrypt: %v", err)
	}
}
