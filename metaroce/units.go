// Package metaroce is the MetaRoCE-style protocol core: wire format, paths,
// SACK-based loss repair, direct placement, streams, memory regions and the
// verbs-like API objects.
//
// The package is sans-I/O. It performs no system calls, starts no
// goroutines and never reads the clock: every entry point takes the current
// time as a Time argument, outgoing packets are written into buffers the
// caller supplies, and incoming packets are handed in by the caller. The same
// code therefore runs under the deterministic simulator, over UDP sockets and
// over DPDK.
//
// Concurrency contract: an Endpoint and everything reachable from it (its
// connections, queue pairs, completion queues and memory regions) belong to
// one goroutine, the endpoint's owner (an engine shard). No method is safe
// for concurrent use.
package metaroce

// ConnID identifies a connection at one endpoint. Each direction of a
// connection uses the id chosen by the receiving side; 0 is never a valid id.
type ConnID uint32

// StreamID identifies an ordered stream (a verbs queue pair) within a
// connection.
type StreamID uint16

// MsgSeq numbers the messages a stream sends, from 0, in posting order.
type MsgSeq uint32

// ByteCount counts bytes.
type ByteCount uint64

// NodeID identifies an endpoint across restarts. Backends derive it from a
// stable identity (configured, or from the endpoint's address).
type NodeID uint64

// Incarnation distinguishes successive lives of one NodeID: a restarted
// endpoint must pick a new value (backends use a random or boot-time value).
type Incarnation uint32
