package perplexity

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// The base file is llama-perplexity's --kl-divergence-base format, so a file written by either
// tool is read by the other. All numbers are little-endian:
//
//	"_logits_"                     8 bytes
//	ctx                            uint32 (tokens per chunk)
//	vocab                          int32
//	chunks                         int32
//	tokens                         int32 x chunks*ctx (the text's tokens, before any BOS replacement)
//	per chunk, per scored position (ctx-1-ctx/2 of them, positions ctx/2 .. ctx-2):
//	  scale, minLogProb            float32, float32
//	  q                            uint16 x vocab, plus one uint16 of padding when vocab is odd
//
// A position's log-probability of token i is scale*q[i] + minLogProb: the log-softmax of its
// logits quantized to 16 bits over the 16 nats below the largest (smaller ones clamp to
// minLogProb, and KL leaves them out). So a file is exactly BaseSize(ctx, vocab, chunks)
// bytes: 2*(vocab+5) bytes per scored position, about 77 MB per 512-token chunk of a
// 152k-token vocabulary.

const baseMagic = "_logits_"

// baseHeader is the fixed part before the tokens.
const baseHeader = 8 + 4 + 4 + 4

// Limits on a base file's header (a hostile file must not make the reader allocate without
// bound; its size is also checked against the header).
const (
	maxBaseCtx   = 1 << 24
	maxBaseVocab = maxRow
)

// RowLen is the number of uint16 of one position's row in a base file (llama.cpp's nv).
func RowLen(vocab int) int { return 2*((vocab+1)/2) + 4 }

// ScoredPositions is the number of positions of a ctx-token chunk that are scored: the second
// half but its last token, positions ctx/2 .. ctx-2.
func ScoredPositions(ctx int) int { return ctx - 1 - ctx/2 }

// BaseSize is the size in bytes of a base file of chunks chunks of ctx tokens over vocab.
func BaseSize(ctx, vocab, chunks int) (int64, error) {
	if ctx < MinCtx || ctx > maxBaseCtx || vocab < 1 || vocab > maxBaseVocab || chunks < 1 || chunks > math.MaxInt32 {
		return 0, fmt.Errorf("perplexity: a base file of ctx %d, vocab %d, %d chunks is out of range (ctx %d..%d, vocab 1..%d, chunks 1..%d)",
			ctx, vocab, chunks, MinCtx, maxBaseCtx, maxBaseVocab, math.MaxInt32)
	}
	perChunk := int64(ctx)*4 + int64(ScoredPositions(ctx))*int64(RowLen(vocab))*2 // < 2^24*4 + 2^24*2^25*2 < 2^51
	if int64(chunks) > (math.MaxInt64-baseHeader)/perChunk {
		return 0, fmt.Errorf("perplexity: a base file of ctx %d, vocab %d, %d chunks would be over 8 EiB", ctx, vocab, chunks)
	}
	return baseHeader + int64(chunks)*perChunk, nil
}

// EncodeRow writes one position's row of a base file into dst (2*RowLen(len(logits))
// bytes), as llama-perplexity quantizes it: the log-softmax of logits over the 16 nats below
// the largest logit in 65535 steps.
func EncodeRow(dst []byte, logits []float32) error {
	if err := checkRow("logits", logits, 0); err != nil {
		return err
	}
	if len(dst) < 2*RowLen(len(logits)) {
		return fmt.Errorf("perplexity: EncodeRow: dst has %d bytes, a row of %d logits needs %d", len(dst), len(logits), 2*RowLen(len(logits)))
	}
	maxL, minL := logits[0], logits[0]
	for _, v := range logits[1:] {
		maxL, minL = max(maxL, v), min(minL, v)
	}
	minL = max(minL, maxL-16)
	_, _, ls := softmaxNorm(logits)
	logSum := float32(ls)
	minLogProb := minL - maxL - logSum
	scale := (maxL - minL) / 65535
	if math.IsNaN(float64(minLogProb)) || math.IsInf(float64(minLogProb), 0) || math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return errors.New("perplexity: EncodeRow: the logits hold NaN or Inf")
	}
	binary.LittleEndian.PutUint32(dst[0:], math.Float32bits(scale))
	binary.LittleEndian.PutUint32(dst[4:], math.Float32bits(minLogProb))
	q := dst[8 : 2*RowLen(len(logits))]
	clear(q)
	if scale == 0 {
		return nil
	}
	inv := 1 / scale
	for i, v := range logits {
		if v > minL {
			x := math.RoundToEven(float64(inv * float32(v-minL)))
			binary.LittleEndian.PutUint16(q[2*i:], uint16(min(x, 65535)))
		}
	}
	return nil
}

// DecodeRow reads one position's row of a base file (2*RowLen(len(dst)) bytes) into dst as
// log-probabilities: scale*q + minLogProb, in float32 as llama-perplexity computes them.
func DecodeRow(dst []float32, row []byte) error {
	if len(dst) == 0 || len(dst) > maxBaseVocab {
		return fmt.Errorf("perplexity: DecodeRow: dst has %d floats, want 1..%d", len(dst), maxBaseVocab)
	}
	if len(row) < 2*RowLen(len(dst)) {
		return fmt.Errorf("perplexity: DecodeRow: the row has %d bytes, a vocabulary of %d needs %d", len(row), len(dst), 2*RowLen(len(dst)))
	}
	scale := math.Float32frombits(binary.LittleEndian.Uint32(row[0:]))
	minLogProb := math.Float32frombits(binary.LittleEndian.Uint32(row[4:]))
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) || scale < 0 || math.IsNaN(float64(minLogProb)) || math.IsInf(float64(minLogProb), 0) || minLogProb > 0 {
		return fmt.Errorf("perplexity: a base row has scale %v and minimum log-probability %v (want finite, scale >= 0, minimum <= 0)", scale, minLogProb)
	}
	q := row[8:]
	for i := range dst {
		// The explicit conversion keeps the product rounded to float32 (no fused multiply-add).
		dst[i] = float32(scale*float32(binary.LittleEndian.Uint16(q[2*i:]))) + minLogProb
	}
	return nil
}

// Base is an open base file: its header and tokens in memory, its rows read on demand.
type Base struct {
	// Ctx is the chunk length, Vocab the vocabulary, Chunks the number of chunks.
	Ctx, Vocab, Chunks int
	// Tokens are the Chunks*Ctx tokens the base run scored.
	Tokens []int32

	r      io.ReaderAt
	closer io.Closer
}

// OpenBase opens a base file (written by Perplexity with Options.Base, or by
// llama-perplexity --kl-divergence-base) and checks its header against its size.
func OpenBase(path string) (*Base, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("perplexity: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("perplexity: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("perplexity: base file %s is not a regular file (%s)", path, st.Mode().Type())
	}
	b, err := ReadBase(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (base file %s)", err, path)
	}
	b.closer = f
	return b, nil
}

// ReadBase reads a base file's header and tokens from r, whose size is size bytes.
func ReadBase(r io.ReaderAt, size int64) (*Base, error) {
	var h [baseHeader]byte
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return nil, fmt.Errorf("perplexity: not a base file of log-probabilities: cannot read its %d-byte header: %v", baseHeader, err)
	}
	if string(h[:8]) != baseMagic {
		return nil, fmt.Errorf("perplexity: not a base file of log-probabilities: it starts with %q, want %q", h[:8], baseMagic)
	}
	ctx := binary.LittleEndian.Uint32(h[8:])
	vocab := int32(binary.LittleEndian.Uint32(h[12:]))
	chunks := int32(binary.LittleEndian.Uint32(h[16:]))
	want, err := BaseSize(int(ctx), int(vocab), int(chunks))
	if err != nil {
		return nil, err
	}
	if size != want {
		return nil, fmt.Errorf("perplexity: the base file has %d bytes, but its header (ctx %d, vocab %d, %d chunks) needs %d: truncated or not a base file",
			size, ctx, vocab, chunks, want)
	}
	b := &Base{Ctx: int(ctx), Vocab: int(vocab), Chunks: int(chunks), r: r}
	raw := make([]byte, 4*b.Chunks*b.Ctx)
	if _, err := r.ReadAt(raw, baseHeader); err != nil {
		return nil, fmt.Errorf("perplexity: reading the base file's %d tokens: %w", b.Chunks*b.Ctx, err)
	}
	b.Tokens = make([]int32, b.Chunks*b.Ctx)
	for i := range b.Tokens {
		t := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if t < 0 || int(t) >= b.Vocab {
			return nil, fmt.Errorf("perplexity: the base file's token %d is %d, outside its vocabulary of %d", i, t, b.Vocab)
		}
		b.Tokens[i] = t
	}
	return b, nil
}

// ReadRow reads the row of chunk's scored position j (0..ScoredPositions(Ctx)-1, position
// Ctx/2+j) into dst, which must hold 2*RowLen(Vocab) bytes.
func (b *Base) ReadRow(chunk, j int, dst []byte) error {
	n := ScoredPositions(b.Ctx)
	rb := 2 * RowLen(b.Vocab)
	if chunk < 0 || chunk >= b.Chunks || j < 0 || j >= n {
		return fmt.Errorf("perplexity: base row %d of chunk %d: the file has %d chunks of %d rows", j, chunk, b.Chunks, n)
	}
	if len(dst) < rb {
		return fmt.Errorf("perplexity: ReadRow: dst has %d bytes, a row has %d", len(dst), rb)
	}
	off := int64(baseHeader) + int64(b.Chunks)*int64(b.Ctx)*4 + (int64(chunk)*int64(n)+int64(j))*int64(rb)
	if _, err := b.r.ReadAt(dst[:rb], off); err != nil {
		return fmt.Errorf("perplexity: reading base row %d of chunk %d: %w", j, chunk, err)
	}
	return nil
}

// Close closes the file OpenBase opened (nothing for ReadBase).
func (b *Base) Close() error {
	if b.closer == nil {
		return nil
	}
	c := b.closer
	b.closer = nil
	return c.Close()
}

// Match checks that tokens, this run's text, are the tokens the base run scored, cut into
// chunks of ctx. With chunks 0 the text must give exactly the base file's chunks; with
// chunks > 0 (a run limited to that many) it must give at least that many and the base
// file hold at least that many, and those are compared. Its errors name both sides' counts.
func (b *Base) Match(tokens []int32, ctx, chunks int) error {
	if ctx != b.Ctx {
		return fmt.Errorf("perplexity: this run uses chunks of %d tokens, the base file chunks of %d", ctx, b.Ctx)
	}
	n := len(tokens) / ctx
	switch {
	case chunks < 0:
		return fmt.Errorf("perplexity: a limit of %d chunks is negative", chunks)
	case chunks > b.Chunks:
		return fmt.Errorf("perplexity: this run asks for %d chunks (%d tokens) but the base file holds %d tokens (%d chunks of %d)",
			chunks, chunks*ctx, len(b.Tokens), b.Chunks, b.Ctx)
	case chunks > 0 && n < chunks:
		return fmt.Errorf("perplexity: this run's text gives %d tokens (%d chunks of %d), fewer than the %d chunks asked for; the base file holds %d tokens (%d chunks)",
			n*ctx, n, ctx, chunks, len(b.Tokens), b.Chunks)
	case chunks == 0 && n != b.Chunks:
		return fmt.Errorf("perplexity: this run's text gives %d tokens (%d chunks of %d) but the base file holds %d tokens (%d chunks of %d): not the same text, or give -chunks",
			n*ctx, n, ctx, len(b.Tokens), b.Chunks, b.Ctx)
	}
	if chunks > 0 {
		n = chunks
	}
	for i, t := range b.Tokens[:n*ctx] {
		if tokens[i] != t {
			return fmt.Errorf("perplexity: token %d of this run's %d tokens is %d but %d in the base file's %d tokens: not the same text or tokenizer",
				i, n*ctx, tokens[i], t, len(b.Tokens))
		}
	}
	return nil
}

// BaseWriter writes a base file: the header and tokens first, then each scored position's
// row in order.
type BaseWriter struct {
	w             *bufio.Writer
	vocab, rows   int
	want, written int
	buf           []byte
	err           error
}

// NewBaseWriter writes the header and tokens of a base file of chunks of ctx tokens over
// vocab (len(tokens) must be a positive multiple of ctx) to w.
func NewBaseWriter(w io.Writer, ctx, vocab int, tokens []int32) (*BaseWriter, error) {
	if ctx < 1 || len(tokens) == 0 || len(tokens)%ctx != 0 {
		return nil, fmt.Errorf("perplexity: NewBaseWriter: %d tokens are not a positive number of chunks of %d", len(tokens), ctx)
	}
	chunks := len(tokens) / ctx
	if _, err := BaseSize(ctx, vocab, chunks); err != nil {
		return nil, err
	}
	bw := &BaseWriter{w: bufio.NewWriterSize(w, 1<<20), vocab: vocab, want: chunks * ScoredPositions(ctx), buf: make([]byte, 2*RowLen(vocab))}
	h := make([]byte, baseHeader, baseHeader+4*len(tokens))
	copy(h, baseMagic)
	binary.LittleEndian.PutUint32(h[8:], uint32(ctx))
	binary.LittleEndian.PutUint32(h[12:], uint32(vocab))
	binary.LittleEndian.PutUint32(h[16:], uint32(chunks))
	for i, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return nil, fmt.Errorf("perplexity: NewBaseWriter: token %d is %d, outside the vocabulary of %d", i, t, vocab)
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(t))
	}
	if _, err := bw.w.Write(h); err != nil {
		return nil, fmt.Errorf("perplexity: writing the base file: %w", err)
	}
	return bw, nil
}

// WriteRow writes the next scored position's row from its logits.
func (bw *BaseWriter) WriteRow(logits []float32) error {
	if bw.err != nil {
		return bw.err
	}
	if len(logits) != bw.vocab {
		return fmt.Errorf("perplexity: WriteRow: %d logits for a base file of vocabulary %d", len(logits), bw.vocab)
	}
	if bw.written == bw.want {
		return fmt.Errorf("perplexity: WriteRow: the base file's %d rows are all written", bw.want)
	}
	if err := EncodeRow(bw.buf, logits); err != nil {
		return err
	}
	if _, err := bw.w.Write(bw.buf); err != nil {
		bw.err = fmt.Errorf("perplexity: writing the base file: %w", err)
		return bw.err
	}
	bw.written++
	return nil
}

// Flush writes out what is buffered and checks that every row was written.
func (bw *BaseWriter) Flush() error {
	if bw.err != nil {
		return bw.err
	}
	if err := bw.w.Flush(); err != nil {
		return fmt.Errorf("perplexity: writing the base file: %w", err)
	}
	if bw.written != bw.want {
		return fmt.Errorf("perplexity: the base file got %d of its %d rows", bw.written, bw.want)
	}
	return nil
}
