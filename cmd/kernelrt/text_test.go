package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
)

// tinyFile writes the tiny shape with synth, as a user would.
func tinyFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	code, stdout, stderr := run("synth", "-shape", "tiny", "-out", p)
	if code != 0 {
		t.Fatalf("synth -shape tiny: exit %d: %s", code, stderr)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 200<<10 || st.Size() > 2<<20 {
		t.Fatalf("tiny model is %d bytes, want about 1 MB (%s)", st.Size(), stdout)
	}
	return p
}

// TestRunText: text in, text out; the same seed gives the same text at any thread count;
// -chat goes through the chat template; -stop ends the text before the stop string.
func TestRunText(t *testing.T) {
	model := tinyFile(t)
	gen := func(extra ...string) (string, string) {
		t.Helper()
		args := append([]string{"run", "-model", model, "-p", "the weather is", "-n", "24", "-seed", "7"}, extra...)
		code, stdout, stderr := run(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		return stdout, stderr
	}
	a, stderr := gen("-threads", "1")
	for _, want := range []string{"loaded ", "copied ", "of weights into the arena", "prompt: ", "generated 24 tokens", "seed 7"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// -map-weights: the same text, the weights used in place from the file.
	if m, stderrMap := gen("-threads", "1", "-map-weights"); m != a || !strings.Contains(stderrMap, "mapped ") {
		t.Errorf("-map-weights: %q (want %q), stderr:\n%s", m, a, stderrMap)
	}
	if b, _ := gen("-threads", "2"); b != a {
		t.Errorf("seed 7 at 1 and 2 threads:\n%q\n%q", a, b)
	}
	if b, _ := gen("-threads", "2", "-kv", "f16"); b == "" {
		t.Error("no text with an F16 cache")
	}
	if g, _ := gen("-temp", "0"); g == a {
		t.Log("greedy and sampled text agree (possible with random weights)")
	}
	c, stderr := gen("-chat", "-system", "be brief")
	if len(c) == 0 || !strings.Contains(stderr, "prompt: ") {
		t.Errorf("-chat: %q %s", c, stderr)
	}
	if len(a) > 6 {
		stop := strings.TrimSpace(a)[3:6]
		s, _ := gen("-threads", "1", "-stop", stop)
		if strings.Contains(s, stop) || !strings.HasPrefix(a, strings.TrimSuffix(s, "\n")) {
			t.Errorf("-stop %q: %q (unstopped %q)", stop, s, a)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := run("version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kernelrt ", "go: go1.", "cpu: ", "kernel backends built in: ", "serial kernels: ", "runtime: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBadEnvironment: a bad KERNELRT_BACKEND is reported by the first command that runs a
// kernel, not by a panic at start-up: help still works.
func TestBadEnvironment(t *testing.T) {
	if os.Getenv("KERNELRT_ENV_CHILD") == "" {
		// The kernel choice is read once per process: check in a child process.
		exe, err := os.Executable()
		if err != nil {
			t.Skip(err)
		}
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{{[]string{"help"}, 0, "commands:"}, {[]string{"version"}, 1, "KERNELRT_BACKEND"}} {
			out, code := childRun(t, exe, tc.args)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("KERNELRT_BACKEND=bogus kernelrt %v: exit %d, output %q; want exit %d with %q", tc.args, code, out, tc.code, tc.want)
			}
		}
		return
	}
	code, stdout, stderr := run(strings.Split(os.Getenv("KERNELRT_ENV_ARGS"), " ")...)
	os.Stdout.WriteString(stdout + stderr)
	os.Exit(code)
}

// TestNaNScaleFile: a GGUF whose ffn_down holds one NaN fp16 scale makes run fail with an
// error naming the block (it used to print ids 0,0,0,0 and exit 0).
func TestNaNScaleFile(t *testing.T) {
	model := tinyFile(t)
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("blk.1.ffn_down.weight")
	if !ok || ti.Type != gguf.TypeQ8_0 {
		t.Fatalf("tensor blk.1.ffn_down.weight: %v %v", ok, ti)
	}
	off := f.DataOffset + int(ti.Offset) + 34*3 // the fp16 scale of block 3
	raw[off], raw[off+1] = 0x00, 0x7e
	bad := filepath.Join(t.TempDir(), "nan.gguf")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-tokens", "1,2,3"}, {"-p", "hello"}} {
		code, stdout, stderr := run(append([]string{"run", "-model", bad, "-n", "4"}, args...)...)
		if code != 1 || !strings.Contains(stderr, "layer 1 feed-forward block produced a non-finite value") {
			t.Errorf("run %v on a NaN scale: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
