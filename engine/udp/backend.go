package udp

import (
	"context"
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/engine"
)

var _ engine.Backend = (*Backend)(nil)

// Backend runs one transport over UDP sockets. See the package comment.
type Backend struct {
	cfg   Config
	t     verbs.Transport
	local [4]byte
	rx    *net.UDPConn
	rxRaw syscall.RawConn
	port  uint16

	peers  []unix.RawSockaddrInet4 // by PeerHandle
	peerIP [][4]byte

	tx      map[verbs.Entropy]*sender
	senders []*sender
	touched []*sender

	rv    *msgVec
	tv    *msgVec // the burst being sent: packets and destinations
	tmeta []verbs.TxMeta
	coal  engine.Coalescer // nil: one packet per datagram (Config.Coalesce)

	rng     *rand.Rand
	start   time.Time
	epochNS int64
	stats   counters
	capture engine.Capture

	closed bool

	wk waker // Config.Wakeable's eventfd and state (wake.go)
	// own is held by Run's loop (Wakeable) except while it sleeps, and by
	// Progress; owned: Run holds it (progress.go).
	own   sync.Mutex
	owned bool

	// The RawConn callbacks and their results, bound once so that a
	// Step allocates nothing (a closure per call would escape).
	readFn  func(uintptr) bool
	rdBlock bool
	rdN     int
	rdErrno syscall.Errno
	writeFn func(uintptr) bool
	wrHdrs  []mmsghdr
	wrN     int
	wrErrno syscall.Errno
}

func (b *Backend) doRead(fd uintptr) bool {
	b.rdN, b.rdErrno = recvmmsg(fd, b.rv.hdrs)
	return !(b.rdBlock && b.rdErrno == unix.EAGAIN)
}

func (b *Backend) doWrite(fd uintptr) bool {
	b.wrN, b.wrErrno = sendmmsg(fd, b.wrHdrs)
	return b.wrErrno != unix.EAGAIN
}

// sender is one send socket, bound to one source port.
type sender struct {
	conn    *net.UDPConn
	raw     syscall.RawConn
	port    uint16
	tos     int   // the IP_TOS currently set, -1 before the first send
	pending []int // indices into the burst's tv, in order
	hdrs    []mmsghdr
}

// New opens the receive socket. Attach a transport before calling Step.
func New(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, local: cfg.Addr.Addr().As4(), tx: map[verbs.Entropy]*sender{},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x7564702d6c6f7373)), start: time.Now()}
	b.epochNS = b.start.UnixNano()
	b.readFn, b.writeFn = b.doRead, b.doWrite
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(cfg.Addr))
	if err != nil {
		return nil, fmt.Errorf("udp: listen on %v: %w", cfg.Addr, err)
	}
	b.rx = conn
	b.port = uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	if b.rxRaw, err = conn.SyscallConn(); err != nil {
		conn.Close()
		return nil, err
	}
	var serr error
	err = b.rxRaw.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1); serr != nil {
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
			return
		}
		setBuffer(int(fd), unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, cfg.SocketBuffer)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: socket options: %w", err)
	}
	if cfg.Wakeable {
		if err := b.wk.open(b.rxRaw); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return b, nil
}

// setBuffer asks for n bytes with the privileged option (as root it
// ignores the sysctl limit) and falls back to the ordinary one.
func setBuffer(fd, force, plain, n int) {
	if n == 0 {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, n)
	}
}

// Attach sets the transport the backend drives. It sizes the packet
// buffers from t.MaxPacketLen, so call it once, before Step or Run. It
// never fails (the error is engine.Backend's).
func (b *Backend) Attach(t verbs.Transport) error {
	b.t = t
	n := t.MaxPacketLen()
	b.rv = newMsgVec(b.cfg.Burst, n+1, true) // one spare byte tells a too-long datagram
	b.tv = newMsgVec(b.cfg.Burst, n, false)
	b.tmeta = make([]verbs.TxMeta, b.cfg.Burst)
	if c, ok := t.(engine.Coalescer); ok && b.cfg.Coalesce > 1 {
		b.coal = c
	}
	return nil
}

// SetCapture installs (or, with nil, removes) the capture hook. It never
// fails.
func (b *Backend) SetCapture(c engine.Capture) error { b.capture = c; return nil }

// LocalAddr is the address packets are received on (with the port the
// kernel chose when Config.Addr had port 0).
func (b *Backend) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(b.local), b.port)
}

// AddPeer names a peer by its receive address and returns its handle
// (handles are 0, 1, 2, ... in the order peers are added).
func (b *Backend) AddPeer(addr netip.AddrPort) (verbs.PeerHandle, error) {
	if !addr.Addr().Is4() {
		return 0, fmt.Errorf("udp: peer %v is not an IPv4 address", addr)
	}
	ip := addr.Addr().As4()
	for _, p := range b.peerIP {
		if p == ip {
			return 0, fmt.Errorf("udp: peer %v: another peer has address %v (peers are told apart by IP address)", addr, addr.Addr())
		}
	}
	b.peers = append(b.peers, sockaddr4(ip, addr.Port()))
	b.peerIP = append(b.peerIP, ip)
	return verbs.PeerHandle(len(b.peers) - 1), nil
}

// PeerIP is peer h's IPv4 address (the zero address for an unknown
// handle); the RoCEv2 core takes it for its ICRC and CM path records.
func (b *Backend) PeerIP(h verbs.PeerHandle) [4]byte {
	if int(h) < len(b.peerIP) {
		return b.peerIP[h]
	}
	return [4]byte{}
}

// LocalIP is this backend's IPv4 address.
func (b *Backend) LocalIP() [4]byte { return b.local }

// Now is the transport clock: nanoseconds since the backend was created,
// from the monotonic clock.
func (b *Backend) Now() verbs.Time { return verbs.Time(time.Since(b.start)) }

// Stats is a copy of the live counters; any goroutine may call it.
func (b *Backend) Stats() engine.Stats { return b.stats.snapshot() }

// Run is engine.Backend's loop on the calling goroutine: app.Step, then
// one Step with Config.IdleWait as its wait, until app is done, fails or
// ctx is cancelled. A Step that moved nothing waits for a packet (at most
// IdleWait or until the transport's next deadline), so an idle Run sleeps
// in the kernel instead of spinning.
func (b *Backend) Run(ctx context.Context, app engine.App) error {
	if b.t == nil {
		return errors.New("udp: Run before Attach")
	}
	done := ctx.Done()
	if b.wk.efd > 0 {
		// Wakeable: the loop owns the transport except while it sleeps,
		// when Progress may run a step on another thread (progress.go).
		b.own.Lock()
		b.owned = true
		defer func() { b.owned = false; b.own.Unlock() }()
	}
	for {
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		if b.wk.efd > 0 && b.wk.stepAside(b, b.cfg.IdleWait) {
			continue // a polling thread drives (Progress): leave it the transport
		}
		fin, err := app.Step(b.Now())
		if err != nil || fin {
			return err
		}
		if _, err := b.Step(b.cfg.IdleWait); err != nil {
			return err
		}
	}
}

// Step runs the transport for one round: due timers, up to Burst packets
// sent, and up to Burst packets received. When nothing was sent or
// received it waits for a packet, at most until wait has passed or the
// transport's next deadline, whichever is first (wait 0 never waits).
// It returns whether anything was sent or received.
func (b *Backend) Step(wait time.Duration) (bool, error) {
	if b.closed {
		return false, net.ErrClosed
	}
	now := b.Now()
	var got int
	if b.t.NextDeadline() <= now {
		// Read what is already waiting before a timer fires: ACKs that
		// arrived while this goroutine was busy or descheduled are not
		// losses, and a timeout judged before reading them resends (or
		// moves) packets the peer has (issue 13: the spurious resends of a
		// loaded host).
		n, err := b.drain()
		if err != nil {
			return false, err
		}
		got += n
		now = b.Now()
		if b.t.NextDeadline() <= now {
			b.t.OnTimer(now)
		}
	}
	sent, err := b.send(now)
	if err != nil {
		return sent > 0, err
	}
	n, err := b.recv(false)
	got += n
	if err != nil || sent > 0 || got > 0 || wait <= 0 {
		return sent > 0 || got > 0, err
	}
	until := time.Duration(b.t.NextDeadline() - b.Now())
	if until < wait {
		wait = until
	}
	if wait <= 0 {
		return false, nil
	}
	if b.wk.efd > 0 {
		if !b.wk.wait(b, wait) {
			return false, nil
		}
		got, err = b.recv(false)
		return got > 0, err
	}
	if err := b.rx.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return false, err
	}
	got, err = b.recv(true)
	// Clear the deadline at once: left set, it would expire while the
	// next Steps are busy sending, and every later non-blocking read
	// would then fail at once with "deadline exceeded" (recv reads that
	// as "nothing there"), so a sender that never goes idle again would
	// stop reading its ACKs (issue 13).
	if cerr := b.rx.SetReadDeadline(time.Time{}); cerr != nil && err == nil {
		err = cerr
	}
	return got > 0, err
}

// drainBatches bounds drain: a peer sending faster than we read cannot
// hold a due timer back for ever.
const drainBatches = 16

// drain receives without waiting until the socket is empty or
// drainBatches batches were read, and returns the packets read.
func (b *Backend) drain() (int, error) {
	total := 0
	for i := 0; i < drainBatches; i++ {
		n, err := b.recv(false)
		total += n
		if err != nil || n < b.cfg.Burst {
			return total, err
		}
	}
	return total, nil
}

// recv reads one batch and hands it to the transport. With block it
// waits (under the socket's read deadline) until something arrives.
func (b *Backend) recv(block bool) (int, error) {
	v := b.rv
	v.prepRecv()
	b.rdBlock = block
	err := b.rxRaw.Read(b.readFn)
	n, errno := b.rdN, b.rdErrno
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, nil
		}
		return 0, err
	}
	switch errno {
	case 0:
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	default:
		return 0, fmt.Errorf("udp: recvmmsg: %w", errno)
	}
	if n <= 0 {
		return 0, nil
	}
	now := b.Now()
	var bytes, ce, lost, unknown, trunc uint64
	maxLen := len(v.bufs[0]) - 1
	for i := 0; i < n; i++ {
		h := &v.hdrs[i]
		l := int(h.n)
		tos, _, ovfl, ovflOK := parseOOB(v.oob[i][:h.hdr.Controllen])
		if ovflOK {
			b.stats.RxKernelDrops.Store(uint64(ovfl))
		}
		bytes += uint64(l)
		if h.hdr.Flags&unix.MSG_TRUNC != 0 || l > maxLen {
			trunc++
			continue
		}
		if b.cfg.Loss > 0 && b.rng.Float64() < b.cfg.Loss {
			lost++
			continue
		}
		src := v.names[i].Addr
		peer := -1
		for j, ip := range b.peerIP {
			if ip == src {
				peer = j
				break
			}
		}
		if peer < 0 {
			unknown++
			continue
		}
		isCE := tos&3 == 3
		if isCE {
			ce++
		}
		pkt := v.bufs[i][:l]
		if b.capture != nil {
			b.capture(b.epochNS+int64(now), engine.Packet{SrcIP: src, DstIP: b.local, SrcPort: sockaddrPort(&v.names[i]),
				DstPort: b.port, DSCP: tos >> 2, ECN: tos & 3, Payload: pkt})
		}
		b.t.Receive(now, pkt, verbs.RxMeta{Peer: verbs.PeerHandle(peer), CE: isCE})
	}
	b.stats.RxPackets.Add(uint64(n))
	b.stats.RxBytes.Add(bytes)
	if ce > 0 {
		b.stats.RxCE.Add(ce)
	}
	if lost > 0 {
		b.stats.RxInjectedDrops.Add(lost)
	}
	if unknown > 0 {
		b.stats.RxUnknownPeer.Add(unknown)
	}
	if trunc > 0 {
		b.stats.RxTruncated.Add(trunc)
	}
	return n, nil
}

// send takes up to Burst packets from the transport and sends them,
// batched per source-port socket.
func (b *Backend) send(now verbs.Time) (int, error) {
	v := b.tv
	n := 0
	for n < len(v.bufs) {
		m, ok := b.t.NextPacket(now, v.bufs[n])
		if !ok {
			break
		}
		if int(m.Peer) >= len(b.peers) {
			b.stats.TxErrors.Add(1)
			continue
		}
		if b.coal != nil {
			// Follow-ons go to the same peer, path and entropy (the core
			// appends only those); buf holds MaxPacketLen, which the
			// datagram stays within.
			m, _ = engine.Coalesce(b.coal, now, v.bufs[n], m, b.cfg.Coalesce)
		}
		s, err := b.sender(m.Entropy)
		if err != nil {
			return n, err
		}
		v.prepSend(n, m.Len, &b.peers[m.Peer])
		b.tmeta[n] = m
		if len(s.pending) == 0 {
			b.touched = append(b.touched, s)
		}
		s.pending = append(s.pending, n)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	var bytes uint64
	for _, s := range b.touched {
		// Runs of the same ECN codepoint go out in one sendmmsg each.
		for i := 0; i < len(s.pending); {
			tos := b.tos(b.tmeta[s.pending[i]].ECT)
			j := i
			s.hdrs = s.hdrs[:0]
			for j < len(s.pending) && b.tos(b.tmeta[s.pending[j]].ECT) == tos {
				s.hdrs = append(s.hdrs, v.hdrs[s.pending[j]])
				j++
			}
			if err := b.flush(s, tos); err != nil {
				return n, err
			}
			for _, k := range s.pending[i:j] {
				m := b.tmeta[k]
				bytes += uint64(m.Len)
				if b.capture != nil {
					b.capture(b.epochNS+int64(now), engine.Packet{Sent: true, SrcIP: b.local, DstIP: b.peerIP[m.Peer],
						SrcPort: s.port, DstPort: sockaddrPort(&b.peers[m.Peer]), DSCP: uint8(tos >> 2),
						ECN: uint8(tos & 3), Payload: v.bufs[k][:m.Len]})
				}
			}
			i = j
		}
		s.pending = s.pending[:0]
	}
	b.touched = b.touched[:0]
	b.stats.TxPackets.Add(uint64(n))
	b.stats.TxBytes.Add(bytes)
	return n, nil
}

func (b *Backend) tos(ect bool) int {
	t := int(b.cfg.DSCP) << 2
	if ect {
		t |= 2 // ECT(0)
	}
	return t
}

// flush sends s.hdrs from s's socket, waiting while the socket buffer is
// full. Datagrams the kernel refuses are counted and skipped.
func (b *Backend) flush(s *sender, tos int) error {
	if s.tos != tos {
		var serr error
		if err := s.raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos)
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("udp: IP_TOS: %w", serr)
		}
		s.tos = tos
	}
	hdrs := s.hdrs
	for len(hdrs) > 0 {
		b.wrHdrs = hdrs
		err := s.raw.Write(b.writeFn)
		n, errno := b.wrN, b.wrErrno
		if err != nil {
			return err
		}
		switch {
		case errno == 0 && n > 0:
			hdrs = hdrs[n:]
		case errno == unix.EINTR:
		case errno == unix.ECONNREFUSED || errno == unix.EHOSTUNREACH || errno == unix.ENETUNREACH ||
			errno == unix.EMSGSIZE || errno == unix.EPERM || errno == 0:
			// The first datagram could not go (an ICMP error reported on
			// this socket, or a route problem): count it and go on.
			b.stats.TxErrors.Add(1)
			hdrs = hdrs[1:]
		default:
			return fmt.Errorf("udp: sendmmsg: %w", errno)
		}
	}
	return nil
}

// sender returns the socket for source port e, opening it on first use.
func (b *Backend) sender(e verbs.Entropy) (*sender, error) {
	if s, ok := b.tx[e]; ok {
		return s, nil
	}
	if len(b.senders) >= b.cfg.MaxSourcePorts {
		b.stats.PortsShared.Add(1)
		return b.senders[int(e)%len(b.senders)], nil
	}
	ip := netip.AddrFrom4(b.local)
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(e))))
	if err != nil {
		if conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))); err != nil {
			return nil, fmt.Errorf("udp: send socket for source port %d: %w", e, err)
		}
		b.stats.PortFallbacks.Add(1)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = raw.Control(func(fd uintptr) { setBuffer(int(fd), unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, b.cfg.SocketBuffer) })
	s := &sender{conn: conn, raw: raw, port: uint16(conn.LocalAddr().(*net.UDPAddr).Port), tos: -1,
		pending: make([]int, 0, b.cfg.Burst), hdrs: make([]mmsghdr, 0, b.cfg.Burst)}
	b.tx[e] = s
	b.senders = append(b.senders, s)
	return s, nil
}

// SourcePort is the UDP port packets of entropy e leave from (0 before
// the first one is sent).
func (b *Backend) SourcePort(e verbs.Entropy) uint16 {
	if s, ok := b.tx[e]; ok {
		return s.port
	}
	return 0
}

// Close closes every socket. The transport is left as it is.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.wk.close()
	err := b.rx.Close()
	for _, s := range b.senders {
		if cerr := s.conn.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
