#include "textflag.h"

// func cpuPause()
TEXT ·cpuPause(SB), NOSPLIT|NOFRAME, $0-0
	PAUSE
	RET

// func curg() uintptr
TEXT ·curg(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET

// func cputicks() int64
TEXT ·cputicks(SB), NOSPLIT|NOFRAME, $0-8
	RDTSC
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, ret+0(FP)
	RET

// func storeRelease(addr *uint32, v uint32)
TEXT ·storeRelease(SB), NOSPLIT|NOFRAME, $0-12
	MOVQ addr+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
