// Package crc32c computes the CRC-32C (Castagnoli) the metaroce wire format
// seals every packet with, bit for bit the value hash/crc32 gives with
// crc32.MakeTable(crc32.Castagnoli).
//
// On amd64 with PCLMULQDQ it folds the input with carry-less multiplies
// (the technique of Intel's "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ"): four (SSE) or sixteen (AVX-512 VPCLMULQDQ) 128-bit
// lanes advance independently, so the loop is bound by the multiplier's
// throughput, not by the 3-cycle latency of the CRC32 instruction that
// hash/crc32 chains. The folded 128-bit remainder and the tail under 16
// bytes go through the SSE4.2 CRC32 instruction, which is exact for them.
// Short inputs, other architectures and CPUs without the features use
// hash/crc32.
//
// The package is sans-I/O like the cores it serves: no unsafe, no OS
// access; the CPU is probed with CPUID/XGETBV in assembly because the
// standard library's internal/cpu cannot be imported.
package crc32c
