package udp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	binary.NativeEndian.PutUint64(b[0:], uint64(unix.CmsgLen(len(data))))
	binary.NativeEndian.PutUint32(b[8:], uint32(level))
	binary.NativeEndian.PutUint32(b[12:], uint32(typ))
	copy(b[unix.SizeofCmsghdr:], data)
	return b
}

func TestParseOOB(t *testing.T) {
	ovfl := make([]byte, 4)
	binary.NativeEndian.PutUint32(ovfl, 77)
	b := append(cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, ovfl), cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0xbb})...)
	tos, tosOK, n, nOK := parseOOB(b)
	if tos != 0xbb || !tosOK || n != 77 || !nOK {
		t.Fatalf("tos %#x %v ovfl %d %v", tos, tosOK, n, nOK)
	}
	if _, ok, _, ok2 := parseOOB(nil); ok || ok2 {
		t.Fatal("empty buffer found something")
	}
}

// FuzzParseOOB: any control buffer is parsed without a panic or a read
// outside it.
func FuzzParseOOB(f *testing.F) {
	f.Add(cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{3}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseOOB(b)
	})
}
