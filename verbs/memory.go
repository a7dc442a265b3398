package verbs

import (
	"errors"
	"fmt"
	"math"

	"github.com/metaroce/metaroce/internal/queue"
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

// SGE is a scatter/gather entry (ibv_sge): one contiguous local buffer.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   LKey
}

// Keys are index<<16 | tag: the index finds the region in the table, the
// tag changes every time a slot is reused, and 0 is never a valid tag (so
// key 0 is never valid). Slots are reused first in, first out.
//
// Without a Random (SetRandom; the RoCEv2 baseline, as RoCEv2 NICs do)
// tags count 1..65535 per slot and the index is the slot: keys are
// guessable, and a key of a deregistered region matches again only after
// its slot has been reused 65535 times. With a Random (metaroce), the
// table XORs every index with a secret 16-bit value drawn once and every
// tag is drawn afresh at registration (never 0, never the slot's previous
// tag): someone who has seen no key of the table guesses a valid key with
// probability 2^-32 per try at best, someone who has seen keys still has
// to guess 16 bits per region; a dead key matches a later region of its
// slot with probability 2^-16, and then only at that region's own
// (random, see regionAddrShift) address.
const (
	keyTagBits = 16
	keyTagMask = 1<<keyTagBits - 1
	maxRegions = 1<<(32-keyTagBits) - 1
)

// regionAddrShift spaces synthetic region addresses. Without a Random the
// region in slot i starts at (i+1)<<40, so every region registered without
// an address has a distinct, deterministic range of up to 1 TiB (like
// zero-based verbs MRs with a per-region base). With one, the base is a
// random multiple of regionAddrAlign below 2^63 (51 random bits): a range
// of up to 1 TiB then covers at most 2^28 of the 2^51 possible bases, so a
// guessed address falls inside a region with probability at most 2^-23
// (RegionGuessBits).
const (
	regionAddrShift = 40
	regionAddrAlign = 1 << 12
	regionAddrBits  = 63
)

// MaxRegionLen is the largest region that can be registered.
const MaxRegionLen = 1 << regionAddrShift

// Errors of the memory API.
var (
	ErrRegionInvalid = errors.New("verbs: memory region is not registered")
	ErrBadAccess     = errors.New("verbs: invalid access flags")
	ErrBadSGE        = errors.New("verbs: scatter/gather entry outside its region or wrong key")
	ErrTooManyMRs    = errors.New("verbs: too many memory regions")
	ErrBadAddr       = errors.New("verbs: region address range wraps around")
)

// RegionTable is a device's memory regions, found by key, and the
// protection domains they belong to: the one table both transport cores
// embed (by value; the zero value is empty and ready).
type RegionTable struct {
	slots   []regionSlot
	free    queue.Ring[uint32] // unused slots, oldest first
	nextPD  uint32
	rand    Random // nil: guessable keys and addresses (see keyTagBits)
	idxMask uint32 // XORed into every key's index bits (0 without rand)
}

// SetRandom makes the table draw keys and synthetic addresses from r (see
// keyTagBits and regionAddrShift). It must be called before the first
// registration; the cores call it once, when they are created.
func (t *RegionTable) SetRandom(r Random) {
	if len(t.slots) != 0 {
		panic("verbs: SetRandom after a region was registered")
	}
	t.rand = r
	t.idxMask = uint32(r.Uint64()) &^ keyTagMask
}

// RegionGuessBits is the entropy, in bits, that a guess of a valid (rkey,
// address) pair for one region of length n registered by RegisterMR must
// overcome when the table has a Random, for a guesser who has seen no key
// of the table (keyBits) and one who has (tagBits, the fresh tag only):
// the probability per try is 2^-bits or less. The address part is the
// number of possible bases over the bases whose range can contain a given
// address.
func RegionGuessBits(n uint64) (keyBits, tagBits float64) {
	bases := float64(uint64(1) << (regionAddrBits - 12))          // multiples of regionAddrAlign below 2^63
	cover := float64((n + regionAddrAlign - 1) / regionAddrAlign) // bases whose range holds one address
	addr := math.Log2(bases / cover)
	// Tags: 65535 non-zero values less the slot's previous one.
	tag := math.Log2(65534)
	return 16 + tag + addr, tag + addr
}

type regionSlot struct {
	mr  *MemoryRegion
	tag uint16
}

// ProtectionDomain groups memory regions and queue pairs (ibv_pd): a key is
// honoured only on a queue pair of the same domain.
type ProtectionDomain struct {
	t  *RegionTable
	id uint32
}

// AllocPD returns a new protection domain of the table (ibv_alloc_pd).
func (t *RegionTable) AllocPD() *ProtectionDomain {
	t.nextPD++
	return &ProtectionDomain{t: t, id: t.nextPD}
}

// MemoryRegion is registered memory (ibv_mr). The bytes belong to the
// application; the transport reads and writes them during I/O on the
// device's goroutine only, and only within the access flags.
type MemoryRegion struct {
	pd     *ProtectionDomain
	buf    []byte
	addr   uint64
	access Access
	key    uint32
	valid  bool
}

// Addr is the region's base address, as a peer names it in WRITE and READ
// and as local scatter/gather entries name it.
func (m *MemoryRegion) Addr() uint64 { return m.addr }

// Len is the region's length in bytes.
func (m *MemoryRegion) Len() int { return len(m.buf) }

// LKey is the key for local scatter/gather entries.
func (m *MemoryRegion) LKey() LKey { return LKey(m.key) }

// RKey is the key the peer uses to WRITE or READ this region.
func (m *MemoryRegion) RKey() RKey { return RKey(m.key) }

// Bytes returns the registered memory itself.
func (m *MemoryRegion) Bytes() []byte { return m.buf }

// PD is the region's protection domain.
func (m *MemoryRegion) PD() *ProtectionDomain { return m.pd }

// Live reports whether the region is still registered. Transport cores
// check it before every access to bytes of a region they resolved
// earlier (see Deregister).
func (m *MemoryRegion) Live() bool { return m.valid }

// SGE returns a scatter/gather entry covering [off, off+n) of the region.
func (m *MemoryRegion) SGE(off, n int) SGE {
	return SGE{Addr: m.addr + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

// RegisterMR registers buf with the given access (ibv_reg_mr) at a
// synthetic address chosen by the table (see regionAddrShift). buf must
// stay valid and must not be resized until Deregister returns.
func (pd *ProtectionDomain) RegisterMR(buf []byte, access Access) (*MemoryRegion, error) {
	return pd.register(buf, 0, false, access)
}

// RegisterMRAt registers buf at the caller's address addr (ibv_reg_mr with
// the application's own virtual address, or ibv_reg_mr_iova): scatter/
// gather entries and peers' WRITEs and READs then name the bytes by addr
// .. addr+len(buf)-1. Regions registered at addresses may overlap each
// other (verbs allows registering one buffer twice); a key always names
// exactly one region.
func (pd *ProtectionDomain) RegisterMRAt(buf []byte, addr uint64, access Access) (*MemoryRegion, error) {
	if addr+uint64(len(buf)) < addr {
		return nil, ErrBadAddr
	}
	return pd.register(buf, addr, true, access)
}

func (pd *ProtectionDomain) register(buf []byte, addr uint64, at bool, access Access) (*MemoryRegion, error) {
	if access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0 {
		return nil, ErrBadAccess
	}
	if access&AccessRemoteWrite != 0 && access&AccessLocalWrite == 0 {
		return nil, fmt.Errorf("%w: remote write requires local write", ErrBadAccess)
	}
	if len(buf) == 0 || len(buf) > MaxRegionLen {
		return nil, fmt.Errorf("verbs: region length %d outside 1..%d", len(buf), MaxRegionLen)
	}
	t := pd.t
	var idx uint32
	if t.free.Len() > 0 {
		idx = t.free.Pop()
	} else {
		if len(t.slots) >= maxRegions {
			return nil, ErrTooManyMRs
		}
		idx = uint32(len(t.slots))
		t.slots = append(t.slots, regionSlot{})
	}
	s := &t.slots[idx]
	if t.rand == nil {
		s.tag++
		if s.tag == 0 {
			s.tag = 1
		}
		if !at {
			addr = uint64(idx+1) << regionAddrShift
		}
	} else {
		prev := s.tag
		for s.tag == 0 || s.tag == prev {
			s.tag = uint16(t.rand.Uint64())
		}
		if !at {
			addr = t.rand.Uint64() & (1<<regionAddrBits - 1) &^ (regionAddrAlign - 1)
		}
	}
	m := &MemoryRegion{pd: pd, buf: buf, addr: addr, access: access,
		key: (idx<<keyTagBits ^ t.idxMask) | uint32(s.tag), valid: true}
	s.mr = m
	return m, nil
}

// Deregister releases the region (ibv_dereg_mr), also with I/O in flight:
// it revokes rather than refusing. From the moment it returns, the
// region's keys match nothing (a peer's later WRITE or READ under its rkey
// fails with a remote access error, a local SGE naming it is refused at
// post time) and no transport places a byte into its memory or sends one
// from it (see Placeable, Revoked):
//   - work requests already posted with it complete with
//     StatusLocalProtError instead of succeeding; one whose source goes
//     before all of it was sent also puts its queue pair in the error
//     state, as a local protection error does (the peer's receive it had
//     started never completes);
//   - a peer's WRITE under way into it is refused with a remote access
//     error;
//   - a peer's READ being served from it gets no more of its bytes and
//     fails at the peer with StatusRemoteAccessError, as a new READ under
//     the dead key does.
//
// The application may reuse buf at once. It fails with ErrRegionInvalid
// only if the region is not registered.
func (m *MemoryRegion) Deregister() error {
	if !m.valid {
		return ErrRegionInvalid
	}
	t := m.pd.t
	idx := (m.key ^ t.idxMask) >> keyTagBits
	t.slots[idx].mr = nil
	t.free.Push(idx)
	m.valid = false
	return nil
}

// lookup returns the live region a key names, or nil.
func (t *RegionTable) lookup(key uint32) *MemoryRegion {
	idx := (key ^ t.idxMask) >> keyTagBits
	if int(idx) >= len(t.slots) {
		return nil
	}
	s := &t.slots[idx]
	if s.mr == nil || uint32(s.tag) != key&keyTagMask {
		return nil
	}
	return s.mr
}

// Lookup returns the live region key names, or nil (for tests and tools;
// the cores use ResolveLocal and CheckRemote).
func (t *RegionTable) Lookup(key uint32) *MemoryRegion { return t.lookup(key) }

// Span returns the bytes of [addr, addr+n) if the whole range lies inside
// the region.
func (m *MemoryRegion) Span(addr uint64, n uint64) ([]byte, bool) {
	if addr < m.addr {
		return nil, false
	}
	off := addr - m.addr
	if off > uint64(len(m.buf)) || n > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+n], true
}

// ResolveLocal checks a local scatter/gather entry against pd and the
// required access and returns its region and bytes.
func (t *RegionTable) ResolveLocal(pd *ProtectionDomain, sge SGE, need Access) (*MemoryRegion, []byte, bool) {
	m := t.lookup(uint32(sge.LKey))
	if m == nil || m.pd != pd || m.access&need != need {
		return nil, nil, false
	}
	b, ok := m.Span(sge.Addr, uint64(sge.Length))
	return m, b, ok
}

// CheckRemote validates a peer's access to [addr, addr+n) under rkey for a
// queue pair in pd (nil: the queue pair has none, and nothing matches). It
// returns the region and the bytes when every check passes.
func (t *RegionTable) CheckRemote(pd *ProtectionDomain, rkey RKey, addr uint64, n uint64, need Access) (*MemoryRegion, []byte, bool) {
	m := t.lookup(uint32(rkey))
	if m == nil || pd == nil || m.pd != pd || m.access&need != need {
		return nil, nil, false
	}
	b, ok := m.Span(addr, n)
	return m, b, ok
}

// Owns reports whether pd is one of the table's protection domains (a
// queue pair may only be created in a domain of its own device).
func (t *RegionTable) Owns(pd *ProtectionDomain) bool { return pd != nil && pd.t == t }

// Placeable reports whether bytes may be placed into m now (m nil: no
// region, nothing to check).
func (m *MemoryRegion) Placeable() bool { return m == nil || m.valid }

// Revoked reports whether m was deregistered while work used it (m nil:
// no region, never revoked). A transport checks it before it sends bytes
// of a region it resolved earlier.
func (m *MemoryRegion) Revoked() bool { return m != nil && !m.valid }

// FailIfRevoked returns st, or StatusLocalProtError when st is a success
// but m (the local memory of the work request) was deregistered before it
// completed: the completion a transport reports for such work.
func FailIfRevoked(m *MemoryRegion, st Status) Status {
	if st == StatusSuccess && m.Revoked() {
		return StatusLocalProtError
	}
	return st
}
