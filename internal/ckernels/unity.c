/* The cgo backend compiles csrc/ as one translation unit: cgo only builds C files that sit in
 * the Go package's directory, so this file includes the real sources from csrc/. */
#include "../../csrc/quant.c"
#include "../../csrc/gemv.c"
#include "../../csrc/norm.c"
#include "../../csrc/stream.c"
#include "../../csrc/gemm.c"
#include "../../csrc/elementwise.c"
#include "../../csrc/rope.c"
#include "../../csrc/attention.c"
#include "../../csrc/embed.c"
