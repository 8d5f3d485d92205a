package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/kernelrt/kernelrt/orchestrator"
)

// TestServeChild is the child of TestServeSIGTERM: `kernelrt serve` with the arguments in
// KERNELRT_SERVE_ARGS, exiting with its status.
func TestServeChild(t *testing.T) {
	args := os.Getenv("KERNELRT_SERVE_ARGS")
	if args == "" {
		t.Skip("run by TestServeSIGTERM")
	}
	os.Exit(Main(strings.Fields(args), strings.NewReader(""), os.Stdout, os.Stderr))
}

// serveModel writes the synth "tiny" shape (2048-token context): long generations take
// long enough to still be running when a signal arrives.
func serveModel(t *testing.T) string {
	t.Helper()
	return writeSynthetic(t, synthShapes["tiny"](), orchestrator.RecipeQ8_0(), 1)
}

// SIGTERM stops `kernelrt serve` taking requests and drains the running stream before it
// exits 0; with a drain deadline shorter than the stream, the stream is cancelled and the
// server exits 1 at the deadline, saying so.
func TestServeSIGTERM(t *testing.T) {
	model := serveModel(t)
	for _, c := range []struct {
		name, drain string
		code        int
		done        bool // the stream ends with [DONE]
	}{
		{"drained", "60s", 0, true},
		{"deadline", "1ms", 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
			cmd.Env = append(os.Environ(), "KERNELRT_SERVE_ARGS=serve -model "+model+" -addr 127.0.0.1:0 -parallel 2 -ctx 2048 -threads 1 -drain-timeout "+c.drain)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				if errors.Is(err, syscall.ENOEXEC) {
					// make cross runs arm64 tests through qemu-user without binfmt: the
					// binary cannot start itself there; the amd64 run covers this test.
					t.Skipf("cannot re-run the test binary here: %v", err)
				}
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stderr)
			var url string
			var log strings.Builder
			for lines.Scan() {
				log.WriteString(lines.Text() + "\n")
				if _, after, ok := strings.Cut(lines.Text(), "listening on "); ok {
					url, _, _ = strings.Cut(after, " ")
					break
				}
			}
			if url == "" {
				t.Fatalf("no address in the child's output:\n%s", log.String())
			}
			// The server listens before it loads (/health: 503 meanwhile, see
			// serve.Pending); it serves once it says it is ready.
			ready := false
			for !ready && lines.Scan() {
				log.WriteString(lines.Text() + "\n")
				ready = strings.HasSuffix(lines.Text(), "; ready")
			}
			if !ready {
				t.Fatalf("the child never said it was ready:\n%s", log.String())
			}
			if h, err := http.Get(url + "/health"); err != nil || h.StatusCode != 200 {
				t.Fatalf("health once ready: %v %v", h, err)
			} else {
				h.Body.Close()
			}
			resp, err := http.Post(url+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": true, "stream": true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := bufio.NewReader(resp.Body)
			if _, err := body.ReadString('\n'); err != nil { // the opening chunk: the request is running
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(body)
			for lines.Scan() {
				log.WriteString(lines.Text() + "\n")
			}
			err = cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			done := strings.HasSuffix(string(rest), "data: [DONE]\n\n")
			if code != c.code || done != c.done {
				t.Errorf("exit %d, stream complete %v (want %d, %v); stream tail %q\n%s", code, done, c.code, c.done, tail(string(rest), 200), log.String())
			}
			if want := map[bool]string{true: "drained;", false: "drain deadline (1ms) passed"}[c.done]; !strings.Contains(log.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, log.String())
			}
		})
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

func TestServeUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "-model is required"},
		{[]string{"serve", "-model", "x.gguf", "-parallel", "0"}, "-parallel must be 1"},
		{[]string{"serve", "-model", "x.gguf", "-kv", "q4"}, "-kv"},
		{[]string{"serve", "-model", "x.gguf", "-queue", "-2"}, "-queue must be >= 0"},
		{[]string{"serve", "-model", "x.gguf", "-drain-timeout", "-1s"}, "-drain-timeout must be >= 0"},
		{[]string{"serve", "-model", "x.gguf", "-drain", "-1s"}, "-drain-timeout must be >= 0"},
	} {
		if code, _, stderr := run(c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %s", c.args, code, stderr)
		}
	}
}

// A smoke run of `kernelrt bench -serve` on the tiny model: the load generator, the table.
func TestBenchServeSmoke(t *testing.T) {
	model := serveModel(t)
	code, stdout, stderr := run("bench", "-serve", "-model", model, "-streams", "1,2", "-n", "4", "-r", "1", "-threads", "1")
	if code != 0 || !strings.Contains(stdout, "| kernelrt     |       2 |") || !strings.Contains(stdout, "speedup") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := run("bench", "-streams", "1"); code != 2 || !strings.Contains(stderr, "-streams applies to -serve only") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
