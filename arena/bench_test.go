package arena

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// BenchmarkAlloc: ns per Alloc (op = one allocation), with a Reset whenever the arena is
// full. "zeroed" pays for clearing reused memory (the default), "nozero" does not.
func BenchmarkAlloc(b *testing.B) {
	b.Run("float32x256/zeroed", func(b *testing.B) { benchAlloc[float32](b, 256, Options{}) })
	b.Run("float32x256/nozero", func(b *testing.B) { benchAlloc[float32](b, 256, Options{NoZero: true}) })
	b.Run("q8block/nozero", func(b *testing.B) { benchAlloc[q8Block](b, 28, Options{NoZero: true}) })
}

func benchAlloc[T any](b *testing.B, n int, opts Options) {
	opts.Prefault = true
	a, err := New(1<<20, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	var z T
	bytes := n * int(unsafe.Sizeof(z))
	start := a.Mark()
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if a.Left() < bytes+DefaultAlign {
			if err := a.Reset(start); err != nil {
				b.Fatal(err)
			}
		}
		s, err := Alloc[T](a, n)
		if err != nil {
			b.Fatal(err)
		}
		_ = s
	}
	cpu.stop(b)
}

// stridedArena maps 512 MiB with the given policy, prefaulted, and returns it as words.
func stridedArena(b *testing.B, pages PagePolicy) (*Arena, []uint64, int) {
	const size = 512 << 20
	a, err := New(size, Options{Pages: pages, Prefault: true})
	if err != nil {
		b.Fatal(err)
	}
	mem, err := Alloc[uint64](a, size/8)
	if err != nil {
		a.Close()
		b.Fatal(err)
	}
	huge, err := a.HugeBacked()
	if err != nil {
		a.Close()
		b.Fatal(err)
	}
	return a, mem, huge
}

// reportHuge records how much of the arena the kernel backed with huge pages (after the
// loop: b.Loop's timer reset drops metrics reported before it).
func reportHuge(b *testing.B, huge int) { b.ReportMetric(float64(huge)/(1<<20), "hugeMiB") }

var pagePolicies = []struct {
	name  string
	pages PagePolicy
}{{"thp", ForceTHP}, {"4k", ForcePlain}}

// BenchmarkStridedRead reads one word every 4 KiB + 64 bytes over 512 MiB, so every access
// lands on a new page and a new line: TLB reach (8 GiB with 2 MiB pages, a few MiB with
// 4 KiB ones) decides the page-walk cost. Op = one access; SetBytes counts the page touched.
func BenchmarkStridedRead(b *testing.B) {
	for _, pc := range pagePolicies {
		b.Run(pc.name, func(b *testing.B) {
			a, mem, huge := stridedArena(b, pc.pages)
			defer a.Close()
			const stride = (4096 + 64) / 8
			i, sum := 0, uint64(0)
			b.SetBytes(4096)
			cpu := startCPU()
			for b.Loop() {
				sum += mem[i]
				if i += stride; i >= len(mem) {
					i -= len(mem)
				}
			}
			cpu.stop(b)
			reportHuge(b, huge)
			sinkU64 = sum
		})
	}
}

// BenchmarkPageWalk follows a random cycle through all 131072 pages of 512 MiB, one
// dependent load per page: latency per access, page walk included. Op = one access.
func BenchmarkPageWalk(b *testing.B) {
	for _, pc := range pagePolicies {
		b.Run(pc.name, func(b *testing.B) {
			a, mem, huge := stridedArena(b, pc.pages)
			defer a.Close()
			const words = 4096 / 8
			pages := len(mem) / words
			order := rand.New(rand.NewPCG(1, 2)).Perm(pages)
			// Word (page p, line p%64): spreads the chain over cache sets.
			at := func(p int) int { return p*words + (p%64)*8 }
			for k, p := range order {
				mem[at(p)] = uint64(at(order[(k+1)%pages]))
			}
			i := uint64(at(order[0]))
			b.SetBytes(4096)
			cpu := startCPU()
			for b.Loop() {
				i = mem[i]
			}
			cpu.stop(b)
			reportHuge(b, huge)
			sinkU64 = i
		})
	}
}

var sinkU64 uint64
