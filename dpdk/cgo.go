//go:build dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../cgo -O2 -Wno-deprecated-declarations
#include "mr_dpdk.h"
*/
import "C"

import (
	"fmt"

	_ "github.com/metaroce/metaroce/cgo" // the headers: a change rebuilds this package
)

// Error is a DPDK failure: the call that failed and the rte_errno (or
// negative return) it reported.
type Error struct {
	Op    string
	Errno int
}

func (e *Error) Error() string {
	return fmt.Sprintf("dpdk: %s: %s (errno %d)", e.Op, C.GoString(C.rte_strerror(C.int(e.Errno))), e.Errno)
}

// errRet turns a DPDK return value (negative errno, or -1 with rte_errno
// set) into an *Error, nil when ret >= 0.
func errRet(op string, ret C.int) error {
	if ret >= 0 {
		return nil
	}
	n := int(-ret)
	if ret == -1 {
		if e := int(C.mr_errno()); e != 0 {
			n = e
		}
	}
	return &Error{Op: op, Errno: n}
}

// errno wraps the current rte_errno.
func errno(op string) error { return &Error{Op: op, Errno: int(C.mr_errno())} }
