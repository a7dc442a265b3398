//go:build !dpdk

package binary

// DPDK: the tests were built without -tags dpdk, and so is the binary
// Build makes (backend dpdk is refused by it).
const DPDK = false

var buildTags []string
