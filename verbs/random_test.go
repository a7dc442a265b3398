package verbs_test

import (
	"math"
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// Equal seeds give equal sequences; different seeds different ones.
func TestSeededRandomReproducible(t *testing.T) {
	a, b, c := verbs.NewSeededRandom(7), verbs.NewSeededRandom(7), verbs.NewSeededRandom(8)
	same, diff := 0, 0
	for range 1000 {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		if x != y {
			t.Fatalf("seed 7 gave %#x and %#x", x, y)
		}
		same++
		if x != z {
			diff++
		}
	}
	if same != 1000 || diff < 999 {
		t.Fatalf("same %d, differ %d of 1000", same, diff)
	}
}

func keysOf(t *testing.T, seed uint64, n int) []*verbs.MemoryRegion {
	t.Helper()
	var tab verbs.RegionTable
	tab.SetRandom(verbs.NewSeededRandom(seed))
	pd := tab.AllocPD()
	var mrs []*verbs.MemoryRegion
	for range n {
		m, err := pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		mrs = append(mrs, m)
	}
	return mrs
}

// With a Random, keys and addresses differ between seeds and follow no
// sequence; every key still finds its own region, and a re-registered
// slot never gets its previous key back.
func TestRegionKeysRandom(t *testing.T) {
	a, b := keysOf(t, 1, 64), keysOf(t, 2, 64)
	sameKey, sameAddr, seqKey, seqAddr := 0, 0, 0, 0
	for i := range a {
		if a[i].RKey() == b[i].RKey() {
			sameKey++
		}
		if a[i].Addr() == b[i].Addr() {
			sameAddr++
		}
		if i > 0 {
			if d := uint32(a[i].RKey()) - uint32(a[i-1].RKey()); d == 1 || d == 1<<16 || d == 1<<16+1 {
				seqKey++
			}
			if a[i].Addr()-a[i-1].Addr() == 1<<40 {
				seqAddr++
			}
		}
		if a[i].Addr()%4096 != 0 || a[i].Addr() >= 1<<63 {
			t.Fatalf("address %#x not a multiple of 4096 below 2^63", a[i].Addr())
		}
	}
	if sameKey > 0 || sameAddr > 0 || seqKey > 0 || seqAddr > 0 {
		t.Fatalf("of 64 regions: %d keys and %d addresses equal across seeds, %d keys and %d addresses sequential",
			sameKey, sameAddr, seqKey, seqAddr)
	}
	if a[0].RKey() == 1 || a[0].Addr() == 1<<40 {
		t.Fatalf("first region has the guessable key %#x or address %#x", a[0].RKey(), a[0].Addr())
	}

	var tab verbs.RegionTable
	tab.SetRandom(verbs.NewSeededRandom(3))
	pd := tab.AllocPD()
	checked := 0
	for range 2000 {
		m, err := pd.RegisterMR(make([]byte, 64), verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Lookup(uint32(m.RKey())) != m {
			t.Fatalf("key %#x does not find its region", m.RKey())
		}
		old := m.RKey()
		if err := m.Deregister(); err != nil {
			t.Fatal(err)
		}
		n, _ := pd.RegisterMR(make([]byte, 64), verbs.AccessRemoteRead) // the same slot
		if n.RKey() == old || tab.Lookup(uint32(old)) != nil {
			t.Fatalf("re-registered slot took back the dead key %#x", old)
		}
		checked++
		_ = n.Deregister()
	}
	if checked != 2000 {
		t.Fatalf("checked %d", checked)
	}
}

// Guessing a valid (rkey, address) pair for one registered region: the
// probability per try, from the entropy the table draws, is at most 2^-32
// for every region length RegisterMR accepts, also for a guesser who has
// seen other keys of the table; and a million obvious guesses (the keys
// and addresses the table gave out before it had a Random, small values,
// every tag of slot 0 at the old addresses) all fail.
func TestRegionGuessProbability(t *testing.T) {
	for _, n := range []uint64{1, 4096, 1 << 20, 1 << 30, verbs.MaxRegionLen} {
		key, tag := verbs.RegionGuessBits(n)
		pKey, pTag := math.Exp2(-key), math.Exp2(-tag)
		t.Logf("region of %d bytes: p per try %.3g (2^-%.1f) blind, %.3g (2^-%.1f) knowing the index", n, pKey, key, pTag, tag)
		if pKey > math.Exp2(-32) || pTag > math.Exp2(-32) {
			t.Fatalf("region of %d bytes: p per try %g / %g above 2^-32", n, pKey, pTag)
		}
	}
	var tab verbs.RegionTable
	tab.SetRandom(verbs.NewSeededRandom(99))
	pd := tab.AllocPD()
	m, err := pd.RegisterMR(make([]byte, 1<<20), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	tries, hits := 0, 0
	try := func(rkey uint32, addr uint64) {
		tries++
		if _, _, ok := tab.CheckRemote(pd, verbs.RKey(rkey), addr, 8, verbs.AccessRemoteWrite); ok {
			hits++
		}
	}
	addrs := []uint64{0, 4096, 1 << 32, 1 << 40, 2 << 40, 1 << 47, 0x7f0000000000}
	for k := uint32(0); k < 1<<16; k++ {
		for _, a := range addrs {
			try(k, a)       // small keys
			try(k<<16, a)   // every index, tag 0
			try(k|1<<16, a) // slot 1, every tag
			try(k<<16|1, a) // every index, tag 1
		}
		try(k, 1<<40+uint64(k)*4096) // slot 0's every tag, into its old range
	}
	if tries < 1<<20 || hits != 0 {
		t.Fatalf("%d of %d obvious guesses hit the region (key %#x at %#x)", hits, tries, m.RKey(), m.Addr())
	}
	// The control: the right pair is honoured.
	try(uint32(m.RKey()), m.Addr())
	if hits != 1 {
		t.Fatal("the region's own key and address were refused")
	}
}

// Without a Random (the RoCEv2 baseline) the table keeps RoCEv2's
// guessable keys and addresses.
func TestRegionKeysWithoutRandom(t *testing.T) {
	var tab verbs.RegionTable
	m, err := tab.AllocPD().RegisterMR(make([]byte, 8), verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if m.RKey() != 1 || m.Addr() != 1<<40 {
		t.Fatalf("key %#x address %#x, want RoCEv2-style 0x1 and 1<<40", m.RKey(), m.Addr())
	}
}
