package testutil

import "os"

// Emulated reports whether the tests run under a CPU emulator (qemu-user): tools/cross.sh
// sets KERNELRT_EMULATED there. Tests scale down their hammering loops, and skip checks the
// emulator cannot honour (qemu-user answers madvise with success and does nothing).
func Emulated() bool { return os.Getenv("KERNELRT_EMULATED") != "" }
