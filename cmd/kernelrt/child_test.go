package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// childRun reruns this test binary as a child running TestBadEnvironment's child branch
// with KERNELRT_BACKEND=bogus and args; it returns the child's output and exit status.
func childRun(t *testing.T, exe string, args []string) (string, int) {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestBadEnvironment$")
	cmd.Env = append(os.Environ(), "KERNELRT_ENV_CHILD=1", "KERNELRT_BACKEND=bogus", "KERNELRT_ENV_ARGS="+strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if errors.Is(err, syscall.ENOEXEC) {
		// Under user-mode emulation (make cross runs the arm64 tests through qemu-user
		// without binfmt) the binary cannot start itself; the amd64 run covers this test.
		t.Skipf("cannot re-run the test binary here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}
