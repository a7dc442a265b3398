// Package rocev2 is an honest software RoCEv2 transport: InfiniBand
// Reliable Connection (RC) queue pairs over UDP port 4791, as RDMA NICs
// run them (IBA Volume 1 and its Annex A17, "RoCEv2"). It is the baseline
// every metaroce claim is measured against, so it does what NICs do, no
// better and no worse:
//
//   - Wire format: the UDP payload is BTH, the extension headers the opcode
//     calls for (RETH, AETH, ImmDt, DETH), the payload padded to four bytes
//     and the ICRC (see ComputeICRC for the exact masking and the contract
//     with backends). The backend adds Ethernet, IPv4 and UDP.
//   - One UDP source port per QP, derived from the QP numbers as Linux does
//     (SourcePort) and fixed for the QP's life: one ECMP path per QP.
//     Several QPs between two hosts are separate Conns with their own port,
//     PSN spaces and DCQCN rate.
//   - Strict PSN order, go-back-N: the responder NAKs the first packet past
//     a gap (PSN sequence error, carrying the expected PSN), once per gap,
//     and drops until the gap fills; the requester goes back to that PSN.
//     Local ACK timeout with a retry count, RNR NAKs with the RNR timer and
//     rnr_retry, remote access and invalid request NAKs that put both QPs
//     in the error state. See requester.go and responder.go.
//   - DCQCN with NVIDIA ConnectX's default parameters (DCQCNConfig): the
//     receiver turns CE marks into CNPs (at most one per QP per 50 µs), the
//     sender cuts and recovers its rate and paces its packets at it.
//     Every packet but a CNP asks its backend to send it ECT(0)
//     (verbs.TxMeta.ECT, from TrafficClass), as a RoCEv2 NIC does, so a
//     CE-marking fabric marks it instead of dropping it.
//   - The port never sends faster than Config.LineRateBps.
//
// # Connection setup
//
// In band, as on a real NIC: the InfiniBand Communication Manager's
// REQ/REP/RTU exchange in MADs carried by UD SEND Only packets to QP1
// (cm.go). Connect sends the REQ (with the local QPN and starting PSN),
// the passive side (Config.AcceptIncoming) answers with a REP, the active
// side with an RTU; lost messages are repeated. So every backend that
// carries packets (the simulator, the in-memory pair, UDP sockets, DPDK)
// can set up connections without a side channel, and the same API as
// metaroce's works: Endpoint.Connect / Endpoint.Accept, then
// Conn.CreateQP. Close sends a DREQ.
//
// # API
//
// It mirrors metaroce's verbs-like API and reuses its value types (Time,
// RxMeta, TxMeta, PeerHandle, SendWR, RecvWR, SGE, WorkCompletion, Status,
// Access, keys): NewEndpoint, AllocPD, RegisterMR, Connect/Accept,
// CreateQP, PostSend/PostRecv, CompletionQueue.Poll. An Endpoint
// implements verbs.Transport. One Conn is one RC QP.
//
// # Rules
//
// The package is sans-I/O like metaroce: no system calls, no goroutines,
// never the clock (time is an argument), buffers supplied by the caller,
// decoders never panic, and the steady-state packet path allocates
// nothing. An Endpoint and everything reachable from it belong to one
// goroutine.
package rocev2
