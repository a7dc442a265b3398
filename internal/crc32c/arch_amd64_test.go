package crc32c

// archImpls are the raw fold functions this CPU supports.
func archImpls() map[string]func(uint32, []byte) uint32 {
	m := map[string]func(uint32, []byte) uint32{}
	if hasSSE {
		m["sse"] = foldSSE
	}
	if hasAVX512 {
		m["avx512"] = foldAVX512
	}
	return m
}

// minLen is the shortest input a fold function accepts.
func minLen(string) int { return 64 }
