//go:build amd64 && cgo && !purego

package kernelrt

var wantBackends = []string{"asm", "cgo", "generic"}
