package orchestrator

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt"
)

// SynthOptions are SyntheticGGUFWith's options for files that an external quantizer turns
// into small test fixtures (the ik_llama.cpp oracle fixtures of perplexity's TestOracleKL).
// The zero value changes nothing.
type SynthOptions struct {
	// Codebook > 0 draws every 256-value super-block of every F16 weight row (but the
	// embedding's and the output head's, whose rows must differ so that logits do) from a
	// codebook of that many random super-blocks, shared by all tensors: a quantizer without
	// an importance matrix works per block, so the quantized file repeats a few hundred
	// distinct blocks and gzips tens of times smaller. Needs the f16 recipe and rows of a
	// multiple of 256 values.
	Codebook int
	// SharedLayers gives every layer layer 0's weights (the same random streams): a
	// quantizer writes identical tensors, which a fixture stores once.
	SharedLayers bool
	// OutputNormScale, when not 0, multiplies output_norm's weights: the logits of a random
	// model are then that many times wider, its distributions peaky enough that a wrong
	// kernel moves the KL divergence far more than rounding does.
	OutputNormScale float32
}

// synthCodebookBlock is the super-block of Codebook: ggml's K-quant block of 256 values.
const synthCodebookBlock = 256

// maxSynthCodebook bounds Codebook (its blocks are held in memory; a few hundred suffice).
const maxSynthCodebook = 1 << 16

func (o SynthOptions) check(r Recipe) error {
	if o.Codebook < 0 || o.Codebook > maxSynthCodebook {
		return fmt.Errorf("orchestrator: SynthOptions.Codebook = %d: want 0..%d", o.Codebook, maxSynthCodebook)
	}
	if o.Codebook > 0 {
		for _, t := range r.types() {
			if t != F16 {
				return fmt.Errorf("orchestrator: SynthOptions.Codebook needs F16 weights (a quantizer's source); recipe %q has %s", r.Name, t)
			}
		}
	}
	if f := float64(o.OutputNormScale); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e4 {
		return fmt.Errorf("orchestrator: SynthOptions.OutputNormScale = %v: want 0 (none) or a positive factor up to 1e4", o.OutputNormScale)
	}
	return nil
}

// streams returns the per-tensor random stream function: next() for every tensor in the
// order they are added (SyntheticGGUF's streams), and with SharedLayers a layer's tensor gets
// the stream layer 0's tensor of the same name got (next is still called, so the tensors
// outside the layers keep their streams).
func (o SynthOptions) streams(next func() uint64) func(name string) uint64 {
	if !o.SharedLayers {
		return func(string) uint64 { return next() }
	}
	first := map[string]uint64{}
	return func(name string) uint64 {
		s := next()
		rest, ok := strings.CutPrefix(name, "blk.")
		if !ok {
			return s
		}
		num, suffix, ok := strings.Cut(rest, ".")
		if _, err := strconv.Atoi(num); !ok || err != nil {
			return s
		}
		if v, seen := first[suffix]; seen {
			return v
		}
		first[suffix] = s
		return s
	}
}

// codebook returns Codebook random super-blocks of fp16 weights (nil when Codebook is 0),
// uniform over writeF16's range, from a stream of their own.
func (o SynthOptions) codebook(seed uint64) [][]byte {
	if o.Codebook == 0 {
		return nil
	}
	s := seed*0xD1B54A32D192ED03 + 0x5851F42D4C957F2D | 1
	amp := float32(0.02 * math.Sqrt(3))
	cb := make([][]byte, o.Codebook)
	for i := range cb {
		b := make([]byte, 2*synthCodebookBlock)
		for j := 0; j < synthCodebookBlock; j++ {
			binary.LittleEndian.PutUint16(b[2*j:], kernelrt.FP32ToFP16(amp*(2*uniform(&s)-1)))
		}
		cb[i] = b
	}
	return cb
}

// writeF16Codebook streams a rows x cols fp16 matrix whose every super-block is a codebook
// entry picked by the stream seed.
func writeF16Codebook(w io.Writer, cb [][]byte, rows, cols int, seed uint64) error {
	if cols%synthCodebookBlock != 0 {
		return fmt.Errorf("orchestrator: SynthOptions.Codebook needs rows of a multiple of %d values, a matrix has %d", synthCodebookBlock, cols)
	}
	s := seed
	for range rows * cols / synthCodebookBlock {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		if _, err := w.Write(cb[(s>>33)%uint64(len(cb))]); err != nil {
			return err
		}
	}
	return nil
}
