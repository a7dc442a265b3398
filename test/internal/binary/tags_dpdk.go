//go:build dpdk

package binary

// DPDK: the tests were built with -tags dpdk, and so is the binary Build
// makes (its DPDK backend is what they test).
const DPDK = true

var buildTags = []string{"-tags", "dpdk"}
