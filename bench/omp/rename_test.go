package omp

import (
	"os"
	"regexp"
	"testing"
)

// TestRenamesCoverCsrc checks that omp_unity.c renames every external function of the csrc
// files it includes: a missing rename is a duplicate-symbol link error in any binary that
// also links internal/ckernels (bench, cmd/kernelrt).
func TestRenamesCoverCsrc(t *testing.T) {
	unity, err := os.ReadFile("omp_unity.c")
	if err != nil {
		t.Fatal(err)
	}
	renamed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#define (krt_\w+) kbomp_\w+$`).FindAllSubmatch(unity, -1) {
		renamed[string(m[1])] = true
	}
	def := regexp.MustCompile(`(?m)^(?:KRT_TARGET_\w+\s+)?(?:void|float|int\w*|uint\w*)\s+(krt_\w+)\s*\(`)
	n := 0
	for _, f := range []string{"../../csrc/gemv.c", "../../csrc/quant.c"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllSubmatch(src, -1) {
			n++
			if !renamed[string(m[1])] {
				t.Errorf("%s defines external %s, which omp_unity.c does not rename to kbomp_*", f, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("found no kernel definitions in csrc: the pattern is stale")
	}
}
