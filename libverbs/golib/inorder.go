package main

/*
#include <errno.h>
#include <stdint.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"
*/
import "C"

import "github.com/metaroce/metaroce/profile"

// inOrderCaps says, per transport, how the data of one work request of
// opcode op (MRG_OP_*) is written at the receiving side of a QP
// (ibv_query_qp_data_in_order: remote WRITEs and SENDs into this QP, and
// the responses of READs posted on it). MRG_IN_ORDER_WHOLE_MSG: a program
// that sees the last byte of the message sees all of it, so it may poll
// the data instead of the completion.
//
// A map, like internal/transports' Kinds: one entry per kind; a
// kind without one answers 0 (no promise).
var inOrderCaps = map[profile.Transport]func(op int) uint32{
	// metaroce spreads a message's packets over paths and places each
	// where it lands, in any order; only the chunk carrying a WRITE's or
	// WRITE_IMM's last byte waits until the rest of its message has been
	// placed (metaroce/lastbyte.go, docs/protocol.md §11.1). SEND data
	// and READ responses land in arrival order: no promise.
	profile.TransportMetaroce: func(op int) uint32 {
		if op == C.MRG_OP_WRITE || op == C.MRG_OP_WRITE_IMM {
			return C.MRG_IN_ORDER_WHOLE_MSG
		}
		return 0
	},
	// rocev2 is go-back-N: the responder places request packets strictly
	// in PSN order and drops what arrives past a gap, and the requester
	// places READ responses in PSN order too (rocev2/responder.go,
	// requester.go), so a message's last packet is placed last. Within a
	// packet Go's memmove (amd64, the sizes packets have) stores the last
	// bytes last but the first 32 after the middle: WHOLE_MSG holds, an
	// order of 128-byte blocks (ALIGNED_128_BYTES) does not.
	profile.TransportRoCEv2: func(op int) uint32 {
		switch op {
		case C.MRG_OP_WRITE, C.MRG_OP_WRITE_IMM, C.MRG_OP_SEND, C.MRG_OP_SEND_IMM, C.MRG_OP_READ:
			return C.MRG_IN_ORDER_WHOLE_MSG
		}
		return 0
	},
}

// MetaroceVerbsDataInOrder answers for the transport the last
// ibv_open_device read (the profile's), without starting it.
//
//export MetaroceVerbsDataInOrder
func MetaroceVerbsDataInOrder(op C.int, caps *C.uint32_t) C.int {
	openMu.Lock()
	t := opened.transport
	openMu.Unlock()
	*caps = 0
	if f, ok := inOrderCaps[t]; ok {
		*caps = C.uint32_t(f(int(op)))
	}
	return 0
}
