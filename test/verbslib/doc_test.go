// Package verbslib_test checks metaroce's libibverbs.so.1 (libverbs/,
// built by make verbs into build/verbs/) against Debian's rdma-core 44:
// the exported (name, version) pairs, that unmodified programs resolve
// every symbol, the object layouts, and unmodified programs' runs.
package verbslib_test
