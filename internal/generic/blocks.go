package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// qk is the number of weights per quantized block.
const qk = 32

// blockQ8_0 mirrors krt_block_q8_0 (34 bytes): value[j] = fp16(d) * qs[j].
type blockQ8_0 struct {
	d  uint16
	qs [qk]int8
}

// blockQ5_0 mirrors krt_block_q5_0 (22 bytes): value[j] = fp16(d) * (q(j) - 16).
type blockQ5_0 struct {
	d  uint16
	qh [4]uint8
	qs [qk / 2]uint8
}

// Compile-time layout checks: the Go views must match the C structs byte for byte.
var (
	_ [34 - unsafe.Sizeof(blockQ8_0{})]byte
	_ [unsafe.Sizeof(blockQ8_0{}) - 34]byte
	_ [22 - unsafe.Sizeof(blockQ5_0{})]byte
	_ [unsafe.Sizeof(blockQ5_0{}) - 22]byte
)

// q5 returns the 5-bit quant of element j (0..31) of a Q5_0 block.
func (b *blockQ5_0) q5(j int) int32 {
	qh := uint32(b.qh[0]) | uint32(b.qh[1])<<8 | uint32(b.qh[2])<<16 | uint32(b.qh[3])<<24
	var lo uint8
	if j < qk/2 {
		lo = b.qs[j] & 0x0f
	} else {
		lo = b.qs[j-qk/2] >> 4
	}
	return int32(lo) | int32((qh>>uint(j))&1)<<4
}

// q8s views n Q8_0 blocks at p.
func q8s(p kern.P, n int) []blockQ8_0 { return unsafe.Slice((*blockQ8_0)(p), n) }

// q5s views n Q5_0 blocks at p.
func q5s(p kern.P, n int) []blockQ5_0 { return unsafe.Slice((*blockQ5_0)(p), n) }

// i32s views n int32 at p.
func i32s(p kern.P, n int) []int32 { return unsafe.Slice((*int32)(p), n) }
