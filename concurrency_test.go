package kernelrt

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt/internal/testutil"
)

// TestRuntimeConcurrentCalls: one Runtime used from 8 goroutines, 1,000 calls each, mixing
// calls the table splits over the pool (a 1024x256 GEMV, thresholds forced low) with calls
// it runs on the caller (a small RMSNorm, a 64-row GEMV). Every result is checked against
// the serial kernel's; with -race (make test-race) the detector watches the shared job and
// the report ring. Before the job adapter was shared under a lock, the split GEMV's job was
// overwritten by another goroutine's and results came out wrong.
func TestRuntimeConcurrentCalls(t *testing.T) {
	for _, trace := range []int{0, 64} {
		t.Run(fmt.Sprintf("trace=%d", trace), func(t *testing.T) {
			rt := newTestRuntime(t, Options{Threads: 2, NoPin: true, Trace: trace})
			rt.SetMinElements(OpGemvQ8_0, 1024, 1024)
			const goroutines = 8
			calls := 1000
			if testutil.Emulated() {
				// Under qemu-user (make cross) every call costs 20-50x more and the spinning
				// workers share 2 cores with the other packages' tests: 100 calls each still
				// interleave the goroutines thousands of times.
				calls = 100
			}
			type input struct {
				w, x     []BlockQ8_0
				wantBig  []float32
				wantSmal []float32
				src, nw  []float32
				wantNorm []float32
			}
			ins := make([]input, goroutines)
			for g := range ins {
				in := &ins[g]
				in.w, _ = quantRand(t, 1024, 256, uint64(10+g))
				in.x, _ = quantRand(t, 1, 256, uint64(50+g))
				in.wantBig = make([]float32, 1024)
				if err := GemvQ8_0(in.wantBig, in.w, in.x, 1024, 256); err != nil {
					t.Fatal(err)
				}
				in.wantSmal = make([]float32, 64)
				if err := GemvQ8_0(in.wantSmal, in.w[:64*256/QK], in.x, 64, 256); err != nil {
					t.Fatal(err)
				}
				in.src, in.nw = randF32(newRand(uint64(g)), 256, 2), randF32(newRand(uint64(g+100)), 256, 1)
				in.wantNorm = make([]float32, 256)
				if err := RMSNorm(in.wantNorm, in.src, in.nw, 1, 256, 1e-6); err != nil {
					t.Fatal(err)
				}
			}
			if active, _ := rt.Decide(OpGemvQ8_0, Shape{Rows: 1024, Cols: 256, Tokens: 1}, Decode); active != 2 {
				t.Fatalf("the big GEMV would run on %d workers, want 2 (the test needs split calls)", active)
			}
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func(in *input) {
					defer wg.Done()
					big, small, norm := make([]float32, 1024), make([]float32, 64), make([]float32, 256)
					for i := 0; i < calls; i++ {
						if err := rt.GemvQ8_0(big, in.w, in.x, 1024, 256); err != nil {
							errs <- err
							return
						}
						if err := rt.GemvQ8_0(small, in.w[:64*256/QK], in.x, 64, 256); err != nil {
							errs <- err
							return
						}
						if err := rt.RMSNorm(norm, in.src, in.nw, 1, 256, 1e-6); err != nil {
							errs <- err
							return
						}
						for _, c := range []struct {
							name      string
							got, want []float32
						}{{"split GEMV", big, in.wantBig}, {"serial GEMV", small, in.wantSmal}, {"RMSNorm", norm, in.wantNorm}} {
							if d := maxAbsDiff(c.got, c.want); d > 1e-4 {
								errs <- fmt.Errorf("call %d: %s differs from the serial kernel by %g", i, c.name, d)
								return
							}
						}
					}
				}(&ins[g])
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestRuntimeCloseWhileCalling: Close waits for running calls; calls after it return
// ErrClosed, never a fault.
func TestRuntimeCloseWhileCalling(t *testing.T) {
	rt, err := New(Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetMinElements(OpAdd, 16, 16)
	a := make([]float32, 4096)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]float32, 4096)
			for {
				if err := rt.Add(out, a, a); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Add during Close: %v", err)
					}
					return
				}
			}
		}()
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		v := float64(a[i]) - float64(b[i])
		if v < 0 {
			v = -v
		}
		if v > d || v != v {
			d = v
		}
	}
	return d
}
