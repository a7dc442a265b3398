// Package memlink is a deterministic in-memory link between two endpoints,
// side A and side B, with seeded impairments: random, per-path and bursty
// (Gilbert–Elliott) loss, path blackouts (for good or for a while), paths
// held back for a while, reordering, jitter, duplication, bit corruption,
// propagation delay and an optional serialization rate.
//
// It exists so that the protocol can be tested and demonstrated under loss
// with results that repeat exactly: the same Config (Seed included) and the
// same sequence of calls always yield the same deliveries, byte for byte and
// nanosecond for nanosecond.
//
// The link knows nothing of the protocol. A packet is an opaque []byte plus
// a PathKey naming the path it travels (entropy, i.e. UDP source port, and
// plane); impairments are keyed on the PathKey only.
//
// Time is virtual: every call takes now, an int64 nanosecond timestamp whose
// origin the caller chooses. The link never reads a clock, starts no
// goroutine and never sleeps; the caller asks NextDelivery when the next
// packet is due, advances its clock and calls Deliver.
//
// Concurrency contract: a Link belongs to one goroutine. No method is safe
// for concurrent use.
package memlink
