package testutil

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapGuarded commits body bytes (whole pages of size ps) with a PAGE_NOACCESS page either
// side and returns the whole allocation.
func mapGuarded(body, ps int) ([]byte, error) {
	total := body + 2*ps
	addr, err := windows.VirtualAlloc(0, uintptr(total), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return nil, err
	}
	var old uint32
	for _, off := range []int{0, ps + body} {
		if err := windows.VirtualProtect(addr+uintptr(off), uintptr(ps), windows.PAGE_NOACCESS, &old); err != nil {
			windows.VirtualFree(addr, 0, windows.MEM_RELEASE)
			return nil, err
		}
	}
	// The memory is not the Go heap's: reading the address through a pointer keeps vet's
	// unsafeptr check (meant for Go-managed memory) quiet.
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), total), nil
}

func unmapGuarded(mem []byte) error {
	return windows.VirtualFree(uintptr(unsafe.Pointer(unsafe.SliceData(mem))), 0, windows.MEM_RELEASE)
}
