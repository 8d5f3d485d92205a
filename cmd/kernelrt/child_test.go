package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
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
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}
