//go:build unix

package testutil

import "golang.org/x/sys/unix"

// mapGuarded maps body bytes (whole pages of size ps) with a PROT_NONE page either side and
// returns the whole mapping.
func mapGuarded(body, ps int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, body+2*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	if err := unix.Mprotect(mem[:ps], unix.PROT_NONE); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	if err := unix.Mprotect(mem[ps+body:], unix.PROT_NONE); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return mem, nil
}

func unmapGuarded(mem []byte) error { return unix.Munmap(mem) }
