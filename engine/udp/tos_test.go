package udp

import (
	"testing"

	"golang.org/x/sys/unix"
)

func setTOS(t *testing.T, fd uintptr, tos int) {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, tos); err != nil {
		t.Fatal(err)
	}
}
