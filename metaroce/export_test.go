package metaroce

// ProveTo writes into b[:n] (a packet's header and extension) the proof
// tag c's peer would send (token.go): what only a holder of c's token can
// do. For the external tests' controls: the same forgery with the proof
// must be honoured, so that a refusal shows the proof was what was
// missing.
func ProveTo(c *Conn, b []byte, n int) { putTag(b, n, &c.tokLocal) }
