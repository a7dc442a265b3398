package rocev2

import (
	"errors"
	"fmt"

	mr "github.com/metaroce/metaroce/metaroce"
)

// Access, keys and scatter/gather entries are metaroce's types, so that an
// application written against one transport's verbs-like API compiles
// against the other's.
type (
	Access = mr.Access
	LKey   = mr.LKey
	RKey   = mr.RKey
	SGE    = mr.SGE
)

// Access flags (verbs' IBV_ACCESS_*).
const (
	AccessLocalWrite  = mr.AccessLocalWrite
	AccessRemoteWrite = mr.AccessRemoteWrite
	AccessRemoteRead  = mr.AccessRemoteRead
)

// Keys are index<<8 | tag: the index finds the region in the endpoint's
// table, the tag changes each time a slot is reused, so the key of a
// deregistered region never matches its successor (as the 8-bit key part of
// verbs lkeys/rkeys does).
const keyTagBits = 8

// regionAddrShift spaces region addresses: region i starts at (i+1)<<40, a
// deterministic address range of up to 1 TiB per region. The addresses are
// what a peer puts in a RETH.
const regionAddrShift = 40

// MaxRegionLen is the largest region that can be registered.
const MaxRegionLen = 1 << regionAddrShift

// Errors of the memory API.
var (
	ErrRegionBusy    = errors.New("rocev2: memory region has I/O in flight")
	ErrRegionInvalid = errors.New("rocev2: memory region is not registered")
	ErrBadAccess     = errors.New("rocev2: invalid access flags")
	ErrBadSGE        = errors.New("rocev2: scatter/gather entry outside its region or wrong key")
)

// ProtectionDomain groups memory regions and queue pairs (ibv_pd): a remote
// key is honoured only on a queue pair of the same domain.
type ProtectionDomain struct {
	ep *Endpoint
	id uint32
}

// MemoryRegion is registered memory (ibv_mr). The bytes belong to the
// application; the endpoint reads and writes them on its goroutine only,
// and only within the access flags.
type MemoryRegion struct {
	pd     *ProtectionDomain
	buf    []byte
	addr   uint64
	access Access
	key    uint32
	refs   int // posted work requests and READ responses using the region
	valid  bool
}

// Addr is the region's base address, as a peer names it in a RETH.
func (m *MemoryRegion) Addr() uint64 { return m.addr }

// Len is the region's length in bytes.
func (m *MemoryRegion) Len() int { return len(m.buf) }

// LKey is the key for local scatter/gather entries.
func (m *MemoryRegion) LKey() LKey { return LKey(m.key) }

// RKey is the key a peer uses to WRITE or READ this region.
func (m *MemoryRegion) RKey() RKey { return RKey(m.key) }

// Bytes returns the registered memory itself.
func (m *MemoryRegion) Bytes() []byte { return m.buf }

// SGE returns a scatter/gather entry covering [off, off+n) of the region.
func (m *MemoryRegion) SGE(off, n int) SGE {
	return SGE{Addr: m.addr + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

type regionTable struct {
	slots []regionSlot
	free  []uint32
}

type regionSlot struct {
	mr  *MemoryRegion
	tag uint8
}

// RegisterMR registers buf with the given access (ibv_reg_mr). buf must
// stay valid and must not be resized until Deregister succeeds.
func (pd *ProtectionDomain) RegisterMR(buf []byte, access Access) (*MemoryRegion, error) {
	if access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0 {
		return nil, ErrBadAccess
	}
	if access&AccessRemoteWrite != 0 && access&AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write requires local write", ErrBadAccess)
	}
	if len(buf) == 0 || len(buf) > MaxRegionLen {
		return nil, fmt.Errorf("rocev2: region length %d outside 1..%d", len(buf), MaxRegionLen)
	}
	t := &pd.ep.regions
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(t.slots) >= 1<<(32-keyTagBits)-1 {
			return nil, errors.New("rocev2: too many memory regions")
		}
		idx = uint32(len(t.slots))
		t.slots = append(t.slots, regionSlot{})
	}
	s := &t.slots[idx]
	s.tag++
	m := &MemoryRegion{pd: pd, buf: buf, addr: uint64(idx+1) << regionAddrShift, access: access,
		key: idx<<keyTagBits | uint32(s.tag), valid: true}
	s.mr = m
	return m, nil
}

// Deregister releases the region (ibv_dereg_mr). It fails with
// ErrRegionBusy while a posted work request or a READ response still uses
// the region.
func (m *MemoryRegion) Deregister() error {
	if !m.valid {
		return ErrRegionInvalid
	}
	if m.refs > 0 {
		return ErrRegionBusy
	}
	t := &m.pd.ep.regions
	idx := m.key >> keyTagBits
	t.slots[idx].mr = nil
	t.free = append(t.free, idx)
	m.valid = false
	return nil
}

func (t *regionTable) lookup(key uint32) *MemoryRegion {
	idx := key >> keyTagBits
	if int(idx) >= len(t.slots) {
		return nil
	}
	s := &t.slots[idx]
	if s.mr == nil || uint32(s.tag) != key&(1<<keyTagBits-1) {
		return nil
	}
	return s.mr
}

// span returns [addr, addr+n) if the whole range lies inside the region.
func (m *MemoryRegion) span(addr uint64, n uint64) ([]byte, bool) {
	if addr < m.addr {
		return nil, false
	}
	off := addr - m.addr
	if off > uint64(len(m.buf)) || n > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+n], true
}

// resolveLocal checks a local scatter/gather entry.
func (t *regionTable) resolveLocal(pd *ProtectionDomain, sge SGE, need Access) (*MemoryRegion, []byte, bool) {
	m := t.lookup(uint32(sge.LKey))
	if m == nil || m.pd != pd || m.access&need != need {
		return nil, nil, false
	}
	b, ok := m.span(sge.Addr, uint64(sge.Length))
	return m, b, ok
}

// checkRemote validates a peer's access to [addr, addr+n) under rkey for a
// queue pair in pd, and returns the bytes when every check passes.
func (t *regionTable) checkRemote(pd *ProtectionDomain, rkey uint32, addr uint64, n uint64, need Access) (*MemoryRegion, []byte, bool) {
	m := t.lookup(rkey)
	if m == nil || pd == nil || m.pd != pd || m.access&need != need {
		return nil, nil, false
	}
	b, ok := m.span(addr, n)
	return m, b, ok
}
