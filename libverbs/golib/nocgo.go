//go:build !cgo

package main

import (
	"fmt"
	"os"
)

// Without cgo there is no C ABI to export: the Go half of the verbs
// library exists only as a -buildmode=c-shared build with cgo (make
// verbs). This file keeps the package buildable and testable as a
// package (go test ./... with CGO_ENABLED=0) and says so if run.
func main() {
	fmt.Fprintln(os.Stderr, "libverbs/golib: the verbs library's Go half needs cgo (CGO_ENABLED=1, make verbs)")
	os.Exit(2)
}
