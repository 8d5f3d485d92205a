//go:build cgo && amd64 && !purego

package ckernels

import (
	"testing"

	"github.com/kernelrt/kernelrt/internal/ckernels/csrchash"
)

// The go command does not see csrc/ edits (they are #included from outside this directory);
// csrc_hash.go carries their hash so it does. A stale hash means stale object code.
func TestCsrcHashFresh(t *testing.T) {
	sum, err := csrchash.Sum("../../csrc")
	if err != nil {
		t.Fatal(err)
	}
	if sum != csrcHash {
		t.Fatalf("csrc/ changed since internal/ckernels/csrc_hash.go was generated: the cgo backend may be running stale C; run `go generate ./internal/ckernels` (make does it)")
	}
}
