package main

import (
	"errors"
	"testing"
)

func TestPatternCheckFindsFirstWrongByte(t *testing.T) {
	b := make([]byte, 1001) // not a multiple of 8: the tail is checked too
	fillPattern(b, 3, 17)
	if err := checkPattern(b, 3, 17, 17); err != nil {
		t.Fatal(err)
	}
	// Another message's or QP's pattern does not pass for this one.
	if checkPattern(b, 3, 18, 18) == nil || checkPattern(b, 2, 17, 17) == nil {
		t.Fatal("a neighbouring pattern matched")
	}
	for _, off := range []int{0, 7, 8, 500, 1000} {
		c := append([]byte(nil), b...)
		c[off] ^= 1
		c[len(c)-1] ^= 2 // a later wrong byte is not the one reported
		var ve *verifyError
		if err := checkPattern(c, 3, 17, 17); !errors.As(err, &ve) || ve.Offset != min(off, len(c)-1) || ve.Msg != 17 || ve.QP != 3 {
			t.Fatalf("offset %d: %v", off, err)
		}
	}
}

func TestLastInSlot(t *testing.T) {
	for _, c := range []struct{ posted, j, depth, want int }{
		{300, 43, 128, 299}, {300, 44, 128, 172}, {5, 7, 128, -1}, {128, 127, 128, 127}, {129, 0, 128, 128},
	} {
		if got := lastInSlot(c.posted, c.j, c.depth); got != c.want {
			t.Errorf("lastInSlot(%d, %d, %d) = %d, want %d", c.posted, c.j, c.depth, got, c.want)
		}
	}
}
