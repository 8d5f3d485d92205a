// Package csrchash hashes the C sources of csrc/. The cgo backend compiles them through
// #include from unity.c, and the go command's build cache does not track files included from
// outside a package's directory, so an edited kernel would silently keep its old object code.
// The hash is written into a Go file of the cgo package (go generate), which makes the go
// command rebuild whenever a C source changes; a test fails when the recorded hash is stale.
package csrchash

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
)

// Sum returns the SHA-256 over the names and contents of dir's *.c, *.h and *.inc files.
func Sum(dir string) (string, error) {
	var names []string
	for _, pat := range []string{"*.c", "*.h", "*.inc"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return "", err
		}
		names = append(names, m...)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return "", err
		}
		h.Write([]byte(filepath.Base(n)))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
