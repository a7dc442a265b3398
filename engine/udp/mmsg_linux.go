package udp

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: a msghdr and the byte count the kernel
// returns for it.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// oobLen fits the two control messages the receive socket asks for:
// IP_TOS (1 byte) and SO_RXQ_OVFL (4 bytes), each in its own cmsg.
var oobLen = unix.CmsgSpace(1) + unix.CmsgSpace(4)

// msgVec is a reusable vector of messages for recvmmsg or sendmmsg. Its
// buffers are allocated once; a call fills in the first n entries. The
// msghdrs point into the vector's own slices, which live on the heap and
// do not move, for as long as the vector is in use.
type msgVec struct {
	hdrs  []mmsghdr
	iov   []unix.Iovec
	names []unix.RawSockaddrInet4
	oob   [][]byte
	bufs  [][]byte
}

func newMsgVec(n, bufLen int, withOOB bool) *msgVec {
	v := &msgVec{
		hdrs:  make([]mmsghdr, n),
		iov:   make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet4, n),
		bufs:  make([][]byte, n),
	}
	if withOOB {
		v.oob = make([][]byte, n)
	}
	for i := range v.hdrs {
		v.bufs[i] = make([]byte, bufLen)
		if withOOB {
			v.oob[i] = make([]byte, oobLen)
		}
	}
	return v
}

// prepRecv sets up every entry to receive into its whole buffer.
func (v *msgVec) prepRecv() {
	for i := range v.hdrs {
		h := &v.hdrs[i].hdr
		v.iov[i].Base = &v.bufs[i][0]
		v.iov[i].SetLen(len(v.bufs[i]))
		h.Name = (*byte)(unsafe.Pointer(&v.names[i]))
		h.Namelen = unix.SizeofSockaddrInet4
		h.Iov = &v.iov[i]
		h.SetIovlen(1)
		h.Control = &v.oob[i][0]
		h.SetControllen(len(v.oob[i]))
		h.Flags = 0
		v.hdrs[i].n = 0
	}
}

// prepSend sets entry i to send bufs[i][:n] to dst.
func (v *msgVec) prepSend(i, n int, dst *unix.RawSockaddrInet4) {
	h := &v.hdrs[i].hdr
	v.names[i] = *dst
	v.iov[i].Base = &v.bufs[i][0]
	v.iov[i].SetLen(n)
	h.Name = (*byte)(unsafe.Pointer(&v.names[i]))
	h.Namelen = unix.SizeofSockaddrInet4
	h.Iov = &v.iov[i]
	h.SetIovlen(1)
	h.Control = nil
	h.SetControllen(0)
}

// recvmmsg reads up to len(hdrs) datagrams without blocking. It returns
// the number read, 0 with EAGAIN when none is waiting.
func recvmmsg(fd uintptr, hdrs []mmsghdr) (int, syscall.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// sendmmsg sends hdrs without blocking; it returns how many were sent.
func sendmmsg(fd uintptr, hdrs []mmsghdr) (int, syscall.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// parseOOB finds the IP TOS byte and the SO_RXQ_OVFL drop counter in a
// received control buffer, without allocating. ok reports each was found.
func parseOOB(b []byte) (tos uint8, tosOK bool, ovfl uint32, ovflOK bool) {
	const hdrLen = unix.SizeofCmsghdr
	for len(b) >= hdrLen {
		l := int(binary.NativeEndian.Uint64(b[0:8]))
		level := int32(binary.NativeEndian.Uint32(b[8:12]))
		typ := int32(binary.NativeEndian.Uint32(b[12:16]))
		if l < hdrLen || l > len(b) {
			return
		}
		data := b[hdrLen:l]
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
			tos, tosOK = data[0], true
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4:
			ovfl, ovflOK = binary.NativeEndian.Uint32(data), true
		}
		adv := unix.CmsgSpace(l - hdrLen)
		if adv > len(b) {
			return
		}
		b = b[adv:]
	}
	return
}

func sockaddr4(ap [4]byte, port uint16) unix.RawSockaddrInet4 {
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	return sa
}

func sockaddrPort(sa *unix.RawSockaddrInet4) uint16 {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return uint16(p[0])<<8 | uint16(p[1])
}
