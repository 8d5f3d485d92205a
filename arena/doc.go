// Package arena is kernelrt's memory layer: every byte the hot path touches (weights,
// activations, KV cache, per-worker scratch) lives in anonymous mmap memory that the Go GC
// never scans or moves, and is planned before anything runs so that kernels never allocate.
//
// Three ways in:
//
//   - New maps one arena of a given size; Alloc / AllocAligned / AllocPerWorker bump-allocate
//     typed slices from it, and Mark / Reset give back scratch whose lifetime is one op or
//     one token.
//   - A Plan lists named buffers; Plan.Layout computes every offset and the total without
//     mapping anything; NewFromLayout maps exactly that much and Get / GetPerWorker hand out
//     the planned buffers, which cannot fail for lack of memory.
//   - MapFile maps a weights file read-only so tensor data can be used in place.
//
// Arena memory must hold no Go pointers (the GC cannot see it): Alloc and Get refuse such
// element types. Slices handed out have cap == len, so append never writes past a buffer
// into its neighbour.
//
// Platforms: on Linux the arena can get huge pages (MAP_HUGETLB, then transparent huge pages
// via MADV_HUGEPAGE) and reports how much of it they back. Other Unix systems (macOS, BSD)
// map plain pages with mmap; Windows reserves and commits with VirtualAlloc and maps files
// with CreateFileMapping and MapViewOfFile. There, Auto gives plain pages and the huge-page
// policies fail with ErrMap; guard pages, Prefault and Mlock work everywhere.
package arena
