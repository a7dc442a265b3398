package metaroce

import (
	"errors"
	"fmt"
)

// Access is the set of operations a memory region permits.
type Access uint8

const (
	AccessLocalWrite  Access = 1 << 0 // receives and READ responses may land here
	AccessRemoteWrite Access = 1 << 1 // the peer may WRITE here (needs AccessLocalWrite, as in verbs)
	AccessRemoteRead  Access = 1 << 2 // the peer may READ from here
)

// LKey names a region for local use in scatter/gather entries.
type LKey uint32

// RKey names a region for the peer's WRITE and READ requests.
type RKey uint32

// Keys are index<<8 | tag: the index finds the region in the endpoint's
// table, the tag changes every time a table slot is reused, so a key of a
// deregistered region never matches its successor.
const keyTagBits = 8

// regionAddrShift spaces region addresses: region i starts at (i+1)<<40, so
// every region has a distinct, deterministic address range of up to 1 TiB
// (like zero-based verbs MRs with a per-region base).
const regionAddrShift = 40

// MaxRegionLen is the largest region that can be registered.
const MaxRegionLen = 1 << regionAddrShift

// Errors of the memory API.
var (
	ErrRegionBusy    = errors.New("metaroce: memory region has I/O in flight")
	ErrRegionInvalid = errors.New("metaroce: memory region is not registered")
	ErrBadAccess     = errors.New("metaroce: invalid access flags")
	ErrBadSGE        = errors.New("metaroce: scatter/gather entry outside its region or wrong key")
)

// ProtectionDomain groups memory regions and queue pairs (ibv_pd): a remote
// key is honoured only on a queue pair of the same domain.
type ProtectionDomain struct {
	ep *Endpoint
	id uint32
}

// MemoryRegion is registered memory (ibv_mr). The bytes belong to the
// application; the endpoint reads and writes them during I/O on the
// endpoint's goroutine only, and only within the access flags.
type MemoryRegion struct {
	pd     *ProtectionDomain
	buf    []byte
	addr   uint64
	access Access
	key    uint32
	refs   int // work requests and READ responses using the region
	valid  bool
}

// Addr is the region's base address, as a peer names it in WRITE and READ.
func (m *MemoryRegion) Addr() uint64 { return m.addr }

// Len is the region's length in bytes.
func (m *MemoryRegion) Len() int { return len(m.buf) }

// LKey is the key for local scatter/gather entries.
func (m *MemoryRegion) LKey() LKey { return LKey(m.key) }

// RKey is the key the peer uses to WRITE or READ this region.
func (m *MemoryRegion) RKey() RKey { return RKey(m.key) }

// Bytes returns the registered memory itself.
func (m *MemoryRegion) Bytes() []byte { return m.buf }

// SGE returns a scatter/gather entry covering [off, off+n) of the region.
func (m *MemoryRegion) SGE(off, n int) SGE {
	return SGE{Addr: m.addr + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

// SGE is a scatter/gather entry (ibv_sge): one contiguous local buffer.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   LKey
}

// regionTable holds every region of an endpoint, indexed by key.
type regionTable struct {
	slots []regionSlot
	free  []uint32
}

type regionSlot struct {
	mr  *MemoryRegion
	tag uint8
}

// RegisterMR registers buf with the given access (ibv_reg_mr). buf must stay
// valid and must not be resized until Deregister succeeds.
func (pd *ProtectionDomain) RegisterMR(buf []byte, access Access) (*MemoryRegion, error) {
	if access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0 {
		return nil, ErrBadAccess
	}
	if access&AccessRemoteWrite != 0 && access&AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write requires local write", ErrBadAccess)
	}
	if len(buf) == 0 || len(buf) > MaxRegionLen {
		return nil, fmt.Errorf("metaroce: region length %d outside 1..%d", len(buf), MaxRegionLen)
	}
	t := &pd.ep.regions
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(t.slots) >= 1<<(32-keyTagBits)-1 {
			return nil, errors.New("metaroce: too many memory regions")
		}
		idx = uint32(len(t.slots))
		t.slots = append(t.slots, regionSlot{})
	}
	s := &t.slots[idx]
	s.tag++
	mr := &MemoryRegion{
		pd:     pd,
		buf:    buf,
		addr:   uint64(idx+1) << regionAddrShift,
		access: access,
		key:    idx<<keyTagBits | uint32(s.tag),
		valid:  true,
	}
	s.mr = mr
	return mr, nil
}

// Deregister releases the region (ibv_dereg_mr). It fails with
// ErrRegionBusy while a posted work request or a READ response still uses
// the region; the region then stays registered.
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

// lookup returns the live region a key names, or nil.
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

// span returns the bytes of [addr, addr+n) if the whole range lies inside
// the region.
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

// resolveLocal checks a local scatter/gather entry against pd and the
// required access and returns its region and bytes.
func (t *regionTable) resolveLocal(pd *ProtectionDomain, sge SGE, need Access) (*MemoryRegion, []byte, bool) {
	mr := t.lookup(uint32(sge.LKey))
	if mr == nil || mr.pd != pd || mr.access&need != need {
		return nil, nil, false
	}
	b, ok := mr.span(sge.Addr, uint64(sge.Length))
	return mr, b, ok
}

// checkRemote validates a peer's access to [addr, addr+n) under rkey for a
// queue pair in pd. It returns the region when every check passes.
func (t *regionTable) checkRemote(pd *ProtectionDomain, rkey RKey, addr uint64, n uint64, need Access) *MemoryRegion {
	mr := t.lookup(uint32(rkey))
	if mr == nil || mr.pd != pd || mr.access&need != need {
		return nil
	}
	if _, ok := mr.span(addr, n); !ok {
		return nil
	}
	return mr
}
