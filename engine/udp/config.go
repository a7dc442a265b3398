package udp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/engine"
)

// Config configures a Backend. Zero values take the defaults named.
type Config struct {
	// Addr is the local IPv4 address and port packets are received on.
	// Port 0 lets the kernel choose (tests); LocalAddr reports it.
	Addr netip.AddrPort
	// Burst is how many packets one recvmmsg or one Step's send pass
	// handles at most. Default 32.
	Burst int
	// MaxSourcePorts bounds the send sockets (one per source port in
	// use). A packet whose entropy would need one more is sent from the
	// socket of the port numerically closest below modulo the bound, and
	// counted in SocketStats.PortsShared. Default 256 (metaroce's MaxPaths).
	MaxSourcePorts int
	// SocketBuffer is the SO_RCVBUF and SO_SNDBUF asked for, in bytes.
	// As root the limit net.core.rmem_max is bypassed (SO_RCVBUFFORCE).
	// Default 4 MiB.
	SocketBuffer int
	// DSCP goes in the IP header of every packet sent (0..63).
	DSCP uint8
	// Loss is the probability that the receive-path impairment stage
	// drops an arriving packet before the transport sees it (0..1).
	Loss float64
	// Seed seeds the impairment stage.
	Seed uint64
	// IdleWait is how long one Run iteration that moved nothing waits
	// for a packet (never past the transport's next deadline): the most
	// an idle Run delays an App.Step that waits on the wall clock.
	// Default 1 ms.
	IdleWait time.Duration
	// Wakeable makes the idle wait end when another thread calls Wake
	// (work handed to the App from outside the loop: the verbs library's
	// posts), and makes it as long as asked, to the nanosecond: it blocks
	// in ppoll on the socket and an eventfd instead of in the Go
	// netpoller, which rounds a wait under 1 ms up to 1 ms and can only
	// be woken through the Go scheduler (wake.go).
	Wakeable bool
	// Coalesce is the most packets one datagram carries: above 1, a
	// datagram the transport built may take more packets of the same
	// connection (new data on the same path, within the connection's
	// largest packet; metaroce/coalesce.go), so that small messages share
	// a datagram and with it the kernel's per-datagram cost (the whole UDP
	// send and receive path, per sendmmsg and recvmmsg entry). 0 (the default)
	// is engine.AutoCoalesce (8); 1: one packet per datagram. A transport that cannot
	// coalesce (rocev2) sends one packet per datagram whatever it is.
	Coalesce int
}

// withDefaults returns c with zero fields set.
func (c Config) withDefaults() Config {
	if c.Burst == 0 {
		c.Burst = 32
	}
	if c.MaxSourcePorts == 0 {
		c.MaxSourcePorts = 256
	}
	if c.SocketBuffer == 0 {
		c.SocketBuffer = 4 << 20
	}
	if c.IdleWait == 0 {
		c.IdleWait = time.Millisecond
	}
	if c.Coalesce == 0 {
		c.Coalesce = engine.AutoCoalesce
	}
	return c
}

// validate names the first field out of range.
func (c Config) validate() error {
	switch {
	case !c.Addr.Addr().Is4():
		return fmt.Errorf("udp: Addr %v is not an IPv4 address", c.Addr)
	case c.Burst < 1 || c.Burst > 1024:
		return fmt.Errorf("udp: Burst = %d, want 1..1024", c.Burst)
	case c.MaxSourcePorts < 1 || c.MaxSourcePorts > 4096:
		return fmt.Errorf("udp: MaxSourcePorts = %d, want 1..4096", c.MaxSourcePorts)
	case c.DSCP > 63:
		return fmt.Errorf("udp: DSCP = %d, want 0..63", c.DSCP)
	case !(c.Loss >= 0 && c.Loss <= 1):
		return fmt.Errorf("udp: Loss = %v, want 0..1", c.Loss)
	case c.SocketBuffer < 0:
		return fmt.Errorf("udp: SocketBuffer = %d, want >= 0", c.SocketBuffer)
	case c.Coalesce < 0 || c.Coalesce > 64:
		return fmt.Errorf("udp: Coalesce = %d, want 0..64", c.Coalesce)
	case c.IdleWait < 0 || c.IdleWait > time.Second:
		return fmt.Errorf("udp: IdleWait = %v, want 0..1s", c.IdleWait)
	}
	return nil
}
