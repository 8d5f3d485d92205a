//go:build cgo && amd64 && !purego

package asm

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/asm/internal/cgonoop"
)

func init() {
	cgoCalls = append(cgoCalls,
		callBench{"cgo-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { cgonoop.Noop() }},
		callBench{"cgo-noop-args", cgonoop.NoopArgs},
	)
}
