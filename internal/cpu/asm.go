//go:build !noasm

package cpu

// detectionOff is false: klauspost/cpuid detects features (see noasm.go).
const detectionOff = false
