// Package cgo holds the C side of metaroce's DPDK data path: headers of
// static-inline wrappers over DPDK's inline fast-path functions (burst rx/tx,
// bulk mbuf alloc/free, ring bursts) and the C lcore loops. The Go packages
// dpdk/, lcore/ and mempool/ include these headers from their cgo preambles
// (#cgo CFLAGS: -I${SRCDIR}/../cgo).
//
// Rules kept here: one cgo call per burst, never per packet; C never keeps
// a Go pointer (every array C reads or writes during a call is either C
// memory or Go memory holding only C pointers, used only for the call);
// struct layouts Go reads directly are locked with _Static_assert.
//
// The headers are included by path, not linked into the packages that use
// them: Go module zips drop symlinks. The go build cache hashes only the
// files of a package's own directory, though, so a change here would not
// rebuild an includer by itself. This package therefore embeds the headers
// (Headers), and every package of the module that uses cgo imports it
// (blank import): a changed header changes this package's compiled
// output, and with it the cache key of each includer. TestIncludersImport
// keeps that rule.
package cgo
