//go:build unix

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestChatTerminal drives `kernelrt chat` through a pseudo-terminal as a person would: two
// turns, a reply stopped with Ctrl-C (SIGINT from the terminal's line discipline), /reset,
// and Ctrl-D to leave. The command runs in a child process (this test binary) whose stdin,
// stdout and stderr are the terminal.
func TestChatTerminal(t *testing.T) {
	if os.Getenv("KERNELRT_CHAT_CHILD") != "" {
		os.Exit(Main(strings.Fields(os.Getenv("KERNELRT_CHAT_ARGS")), os.Stdin, os.Stdout, os.Stderr))
	}
	// A long context and reply limit: the random model never ends a reply itself, so the
	// reply runs for seconds and the Ctrl-C has a reply to stop.
	model := filepath.Join(t.TempDir(), "tiny-long.gguf")
	if code, _, stderr := run("synth", "-shape", "tiny", "-ctx", "32768", "-out", model); code != 0 {
		t.Fatal(stderr)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestChatTerminal$")
	cmd.Env = append(os.Environ(), "KERNELRT_CHAT_CHILD=1",
		"KERNELRT_CHAT_ARGS=chat -model "+model+" -ctx 32768 -n 30000 -seed 3 -threads 1")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer tty.Close()
	out := make(chan string, 1024)
	go func() {
		r := bufio.NewReader(tty)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				out <- string(buf[:n])
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	var seen strings.Builder
	// waitFor reads output until want appears after from (an index into seen).
	waitFor := func(want string, from int) int {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			if i := strings.Index(seen.String()[from:], want); i >= 0 {
				return from + i + len(want)
			}
			select {
			case s, ok := <-out:
				if !ok {
					t.Fatalf("the chat ended before %q appeared; output:\n%s", want, seen.String())
				}
				seen.WriteString(s)
			case <-deadline:
				t.Fatalf("no %q within a minute; output:\n%s", want, seen.String())
			}
		}
	}
	pos := waitFor("> ", 0)
	io.WriteString(tty, "hello there\r")
	pos = waitFor("hello there\r\n", pos) // the echo
	// Once the reply streams, stop it with Ctrl-C.
	for len(seen.String()) < pos+40 {
		s, ok := <-out
		if !ok {
			t.Fatalf("the chat ended during the reply; output:\n%s", seen.String())
		}
		seen.WriteString(s)
	}
	io.WriteString(tty, "\x03")
	pos = waitFor("(stopped)", pos)
	pos = waitFor("> ", pos)
	io.WriteString(tty, "/reset\r")
	pos = waitFor("(conversation reset)", pos)
	pos = waitFor("> ", pos)
	io.WriteString(tty, "\x04") // Ctrl-D: end of input
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chat exited with %v; output:\n%s", err, seen.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("chat did not exit on Ctrl-D; output:\n%s", seen.String())
	}
	t.Logf("terminal:\n%s", seen.String())
}
