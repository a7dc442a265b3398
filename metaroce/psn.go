package metaroce

// PSN is a per-path packet sequence number. Sequence spaces are 32 bits wide
// and wrap; all comparisons use serial-number arithmetic (RFC 1982), which is
// valid while the two numbers being compared are less than 2^31 apart. A path
// never has more than SackBits packets outstanding, far below that.
type PSN uint32

// Less reports whether p precedes q in serial-number order.
func (p PSN) Less(q PSN) bool { return int32(p-q) < 0 }

// LessEq reports whether p precedes or equals q in serial-number order.
func (p PSN) LessEq(q PSN) bool { return int32(p-q) <= 0 }

// Distance returns q-p as a signed count (positive when q follows p).
func (p PSN) Distance(q PSN) int32 { return int32(q - p) }
