//go:build noasm

package cpu

// detectionOff: klauspost/cpuid reads the noasm build tag too and then reports no feature at
// all, which would silently leave every kernel scalar.
const detectionOff = true
