//go:build cgo && amd64 && !purego

package ckernels

// Files' init functions run in file-name order; this one sorts last, so every field is set.
func init() { register() }
