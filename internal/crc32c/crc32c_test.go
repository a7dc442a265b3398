package crc32c

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// impls are the implementations this CPU can run, each checked against
// hash/crc32 on its own (Update picks one, the others would go untested).
func impls(t testing.TB) map[string]func(uint32, []byte) uint32 {
	m := map[string]func(uint32, []byte) uint32{"Update": Update}
	for name, f := range archImpls() {
		m[name] = f
	}
	return m
}

// Every length from 0 to 4096 at every start offset modulo 64, with a
// non-trivial initial CRC: each implementation equals hash/crc32.
func TestMatchesHashCRC32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	checked := 0
	for name, f := range impls(t) {
		for n := 0; n <= 4096; n++ {
			off := r.IntN(64)
			p := buf[off : off+n]
			init := r.Uint32()
			want := crc32.Update(init, table, p)
			if got := Update(init, p); name == "Update" && got != want {
				t.Fatalf("Update len %d off %d: %#08x, want %#08x", n, off, got, want)
			}
			if name != "Update" && n >= minLen(name) {
				if got := ^f(^init, p); got != want {
					t.Fatalf("%s len %d off %d: %#08x, want %#08x", name, n, off, got, want)
				}
			}
			checked++
		}
	}
	if checked < 4097 {
		t.Fatalf("checked %d inputs", checked)
	}
	lo, hi := FoldRange()
	t.Logf("%d inputs; Update uses %s for [%d, %d) bytes", checked, Impl(), lo, hi)
}

// The check value of docs/protocol.md and of the CRC catalogues.
func TestCheckValue(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("CRC-32C(123456789) = %#08x", got)
	}
	long := make([]byte, 10000)
	for i := range long {
		long[i] = byte(i * 7)
	}
	if got, want := Checksum(long), crc32.Checksum(long, table); got != want {
		t.Fatalf("10000 bytes: %#08x, want %#08x", got, want)
	}
}

// Update in pieces equals Update in one go, whatever the cut.
func TestIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, 3000)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	want := crc32.Checksum(p, table)
	for range 500 {
		a, b := r.IntN(len(p)+1), r.IntN(len(p)+1)
		a, b = min(a, b), max(a, b)
		got := Update(Update(Update(0, p[:a]), p[a:b]), p[b:])
		if got != want {
			t.Fatalf("cut at %d, %d: %#08x, want %#08x", a, b, got, want)
		}
	}
}

func TestUpdateAllocs(t *testing.T) {
	p := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() { Checksum(p) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func FuzzMatchesHashCRC32(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"))
	f.Add(uint32(0xffffffff), make([]byte, 300))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		want := crc32.Update(init, table, p)
		for name, fn := range impls(t) {
			var got uint32
			switch {
			case name == "Update":
				got = fn(init, p)
			case len(p) < minLen(name):
				continue
			default:
				got = ^fn(^init, p)
			}
			if got != want {
				t.Fatalf("%s len %d: %#08x, want %#08x", name, len(p), got, want)
			}
		}
	})
}

var sink uint32

// BenchmarkUpdate compares this package with hash/crc32 at the sizes that
// matter to the wire (a 64-byte message, a 1 KiB and a 4 KiB MTU), in one
// run, so that foldMin can be set from figures of one machine.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{16, 32, 48, 64, 96, 128, 256, 1024, 4096} {
		p := make([]byte, n)
		fs := map[string]func([]byte) uint32{
			"hash_crc32": func(p []byte) uint32 { return crc32.Update(0, table, p) },
			"Update":     func(p []byte) uint32 { return Update(0, p) },
		}
		for name, f := range archImpls() {
			if n >= minLen(name) {
				fs[name] = func(p []byte) uint32 { return f(0, p) }
			}
		}
		for name, f := range fs {
			b.Run(name+"/"+itoa(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					sink = f(p)
				}
			})
		}
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}

// CopyUpdate copies exactly len(src) bytes behind the n bytes of buf,
// leaves the rest of buf alone and returns what copy and Update give, for
// heads of 0 to 300 bytes (the fused pass takes up to copyFoldFirst: a
// packet's headers) and every payload length from 0 to 4096 plus a few jumbo ones,
// at random alignments of src and buf.
func TestCopyUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]byte, 9100+64)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	buf := make([]byte, 300+len(src)+64)
	lens := make([]int, 0, 4100)
	for n := 0; n <= 4096; n++ {
		lens = append(lens, n)
	}
	lens = append(lens, 8192, 8192+1, 9000, 9100)
	fused := 0
	for _, m := range lens {
		so, bo, n := r.IntN(64), r.IntN(64), r.IntN(301)
		for i := range buf {
			buf[i] = 0xA5
		}
		b := buf[bo:]
		for i := range n {
			b[i] = byte(r.Uint32())
		}
		init := r.Uint32()
		p := src[so : so+m]
		want := crc32.Update(crc32.Update(init, table, b[:n]), table, p)
		if got := CopyUpdate(init, b, n, p); got != want {
			t.Fatalf("head %d, len %d, src+%d buf+%d: %#08x, want %#08x", n, m, so, bo, got, want)
		}
		if !bytes.Equal(b[n:n+m], p) {
			t.Fatalf("head %d, len %d, src+%d buf+%d: the copy differs from src", n, m, so, bo)
		}
		for i, v := range buf {
			if (i < bo || i >= bo+n+m) && v != 0xA5 {
				t.Fatalf("head %d, len %d, src+%d buf+%d: byte %d outside the copy written", n, m, so, bo, i)
			}
		}
		if copyFold != nil && n <= copyFoldFirst && n+m >= copyFoldFirst {
			fused++
		}
	}
	if copyFold != nil && fused < 3000 {
		t.Fatalf("only %d inputs took the fused pass", fused)
	}
	t.Logf("%d inputs, %d through the fused pass", len(lens), fused)
}

func TestCopyUpdatePastEnd(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic copying 300 bytes behind 10 into 309")
		}
	}()
	CopyUpdate(0, make([]byte, 309), 10, make([]byte, 300))
}

func TestCopyUpdateAllocs(t *testing.T) {
	src, buf := make([]byte, 4096), make([]byte, 4200)
	if n := testing.AllocsPerRun(100, func() { CopyUpdate(0, buf, 58, src) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func FuzzCopyUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("headers"), make([]byte, 1000))
	f.Add(uint32(7), make([]byte, 62), make([]byte, 257))
	f.Fuzz(func(t *testing.T, init uint32, head, p []byte) {
		buf := append(head[:len(head):len(head)], make([]byte, len(p))...)
		got := CopyUpdate(init, buf, len(head), p)
		if want := crc32.Update(crc32.Update(init, table, head), table, p); got != want {
			t.Fatalf("head %d, len %d: %#08x, want %#08x", len(head), len(p), got, want)
		}
		if !bytes.Equal(buf[len(head):], p) {
			t.Fatalf("head %d, len %d: the copy differs", len(head), len(p))
		}
	})
}

// BenchmarkCopyUpdate: the fused pass against copy then Update over a
// packet (58 bytes of headers, a bulk WRITE's, then the payload), with
// the payload walking a region larger than the caches, as one taken from
// a registered region does, at the wire's payload sizes.
func BenchmarkCopyUpdate(b *testing.B) {
	region := make([]byte, 32<<20)
	for i := range region {
		region[i] = byte(i * 7)
	}
	const hdr = 58
	buf := make([]byte, hdr+9000)
	for _, n := range []int{256, 1024, 4096, 8192} {
		fs := map[string]func(src []byte) uint32{
			"copy_then_Update": func(src []byte) uint32 { return Update(0, buf[:hdr+copy(buf[hdr:], src)]) },
			"CopyUpdate":       func(src []byte) uint32 { return CopyUpdate(0, buf, hdr, src) },
		}
		for name, f := range fs {
			b.Run(name+"/"+itoa(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				off := 0
				for b.Loop() {
					sink = f(region[off : off+n])
					if off += n; off+n > len(region) {
						off = 0
					}
				}
			})
		}
	}
}
