package kernelrt

import (
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

// TestBuildTagsPickKernels: each build configuration links the backends it should (wantBackends
// comes from the tag-selected files tags_*_test.go) and the default kernels are the preferred
// one of those (asm, then cgo, then generic) at the best variant this CPU runs.
func TestBuildTagsPickKernels(t *testing.T) {
	if cpu.DetectionOff() {
		t.Skip("-tags noasm: TestNoasmTagRefused")
	}
	if got := Backends(); !slices.Equal(got, wantBackends) {
		t.Fatalf("Backends() = %v, want %v for this build's tags", got, wantBackends)
	}
	got, err := DefaultKernels()
	if err != nil {
		t.Fatal(err)
	}
	want := wantBackends[0]
	for _, b := range []string{"asm", "cgo", "generic"} {
		if slices.Contains(wantBackends, b) {
			want = b
			break
		}
	}
	v := cpu.Best()
	if want == "generic" {
		v = cpu.Ref
	}
	if w := want + "/" + v.String(); got != w && !strings.Contains(t.Name(), "env") {
		t.Errorf("DefaultKernels() = %s, want %s", got, w)
	}
}
