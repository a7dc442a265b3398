// Package cgo holds the C side of metaroce's DPDK data path: headers of
// static-inline wrappers over DPDK's inline fast-path functions (burst rx/tx,
// bulk mbuf alloc/free, ring bursts) and the C lcore loops. The Go packages
// dpdk/ and lcore/ include these headers from their cgo preambles
// (#cgo CFLAGS: -I${SRCDIR}/../cgo); this package has no Go code of its own.
//
// Rules kept here: one cgo call per burst, never per packet; C never keeps
// a Go pointer (every array C reads or writes during a call is either C
// memory or Go memory holding only C pointers, used only for the call);
// struct layouts Go reads directly are locked with _Static_assert.
//
// The Go packages that include these headers (dpdk/, lcore/) hold
// symlinks to them: the go build cache hashes only the files of a
// package's own directory, so without the links a change here would not
// rebuild them.
package cgo
