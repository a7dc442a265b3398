//go:build dpdk

package dpdk

import (
	"encoding/binary"
	"unsafe"
)

func unsafePointer(p *byte) unsafe.Pointer { return unsafe.Pointer(p) }
func readU64(b []byte) uint64              { return binary.LittleEndian.Uint64(b) }
func uintptrOf(b []byte) uintptr           { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
