// Package udp is the UDP-socket backend: it drives one transport core
// (verbs.Transport: metaroce or the RoCEv2 baseline) over real
// kernel UDP sockets on any Linux machine, without hugepages or a NIC of
// its own. It is this project's counterpart of Meta's libsoftmetaroce.
//
// What it does with the sockets:
//
//   - One receive socket, bound to Config.Addr (our port, 4794, or the
//     RoCEv2 port 4791, or any port a test picks). Packets are read with
//     recvmmsg, Config.Burst at a time, with IP_RECVTOS on so that the IP
//     header's ECN field reaches the core as RxMeta.CE, and SO_RXQ_OVFL on
//     so that what the kernel dropped for a full socket buffer is counted.
//   - One send socket per UDP source port: TxMeta.Entropy is the path's
//     source port, and the backend binds a socket to exactly that port on
//     the local address the first time a path uses it, so every path
//     really leaves from its own port and ECMP hashes it as its own flow.
//     The number of send sockets is bounded (Config.MaxSourcePorts); when
//     the exact port is taken the socket gets a kernel-chosen port instead
//     (still one port per path), and SocketStats.PortFallbacks counts that.
//     Packets go out with sendmmsg, batched per socket; the ECN field is
//     set with IP_TOS (ECT(0) when TxMeta.ECT).
//   - Small packets share datagrams (Config.Coalesce, 8 at most by
//     default): after the transport built a datagram, the backend asks it
//     for more packets of the same connection and path to append
//     (metaroce.Endpoint.NextCoalesced), so that 64-byte messages pay the
//     kernel's per-datagram cost once per eight.
//   - Peers are named by PeerHandle; AddPeer maps a handle to the peer's
//     receive address. An arriving packet's peer is found from its source
//     IP address, so two peers need two addresses (on one machine: two
//     loopback addresses, 127.0.0.1 and 127.0.0.2, which Linux routes
//     without any setup).
//
// An optional receive-path impairment stage (Config.Loss) drops arriving
// packets at random before the core sees them, for demos and A/B benches
// over a loopback that never loses anything itself.
//
// Backend is an engine.Backend: Run is the loop (App.Step, then one Step
// per iteration) on the caller's goroutine; Step is the one round it is
// made of, for callers that drive the backend themselves (tests, benches).
//
// Threading: a Backend and the transport it drives belong to one goroutine,
// the one that calls Step or Run (the transport's contract requires it).
// Only Now, Stats and SocketStats may be called from any goroutine.
package udp
