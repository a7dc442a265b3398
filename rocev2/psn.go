package rocev2

// PSN is a 24-bit packet sequence number (BTH:PSN). Arithmetic wraps at
// 2^24 and comparisons use serial-number order over 24 bits, valid while the
// two PSNs compared are less than 2^23 apart (IBA 9.7.1: a requester never
// has more than 2^23 PSNs outstanding).
type PSN uint32

// PSNMask keeps the 24 bits of a PSN.
const PSNMask = 1<<24 - 1

// psnHalf is half the PSN space: the largest distance serial order covers.
const psnHalf = 1 << 23

// Add returns p+n modulo 2^24 (n may be negative).
func (p PSN) Add(n int) PSN { return PSN((uint32(p) + uint32(int32(n))) & PSNMask) }

// Diff returns p-q as a signed distance in [-2^23, 2^23).
func (p PSN) Diff(q PSN) int {
	d := (uint32(p) - uint32(q)) & PSNMask
	if d >= psnHalf {
		return int(d) - 1<<24
	}
	return int(d)
}

// Less reports whether p precedes q in serial order.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }
