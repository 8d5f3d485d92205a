package perplexity

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeModel's logits at position p depend on the token there and p, and it records the
// chunks it was given.
type fakeModel struct {
	vocab  int
	chunks [][]int32
}

func (f *fakeModel) Vocab() int { return f.vocab }

func fakeRow(row []float32, tok int32, p int) {
	for i := range row {
		row[i] = float32(math.Sin(float64(int(tok)*7+i*3+p))) * 4
	}
	row[(int(tok)*5+p)%len(row)] += 3
}

func (f *fakeModel) Eval(tokens []int32, from int, row func(int, []float32) error) error {
	f.chunks = append(f.chunks, append([]int32(nil), tokens...))
	r := make([]float32, f.vocab)
	for p := from; p < len(tokens); p++ {
		fakeRow(r, tokens[p], p)
		if err := row(p, r); err != nil {
			return err
		}
	}
	return nil
}

func testTokens(n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*37 + i*i) % vocab)
	}
	return t
}

func TestEncodeDecodeRow(t *testing.T) {
	const V = 33 // odd: the row has a padding value
	logits := make([]float32, V)
	fakeRow(logits, 5, 9)
	logits[7] = -40 // more than 16 below the top: clamps to the minimum
	row := make([]byte, 2*RowLen(V))
	if RowLen(V) != 38 {
		t.Fatalf("RowLen(33) = %d, want 38 (4 + 33 + 1 padding)", RowLen(V))
	}
	if err := EncodeRow(row, logits); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, V)
	if err := DecodeRow(got, row); err != nil {
		t.Fatal(err)
	}
	exact := make([]float32, V)
	if _, err := LogProbs(exact, logits); err != nil {
		t.Fatal(err)
	}
	step := 16.0 / 65535
	for i := range got {
		if i == 7 {
			if got[i] > exact[0]-15 && got[i] > -16 {
				t.Errorf("clamped log-prob %v is not at the 16-nat floor", got[i])
			}
			continue
		}
		if d := math.Abs(float64(got[i] - exact[i])); d > step/2+1e-5 {
			t.Errorf("log-prob %d: decoded %v, exact %v (off by %g, more than half a step %g)", i, got[i], exact[i], d, step/2)
		}
	}
	// Identical logits give a base within one quantization step: KLD near 0, same top.
	p, err := ComparePosition(got, logits, make([]float32, V), 3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p.KLD) > 1e-4 || !p.SameTop || math.Abs(p.PDiff) > 1e-4 {
		t.Errorf("a model against its own quantized base: %+v, want KLD and PDiff near 0, same top", p)
	}
	// Equal logits: scale 0, every value at the minimum log-prob, log(1/V).
	if err := EncodeRow(row, make([]float32, V)); err != nil {
		t.Fatal(err)
	}
	DecodeRow(got, row)
	if math.Abs(float64(got[0])+math.Log(V)) > 1e-6 {
		t.Errorf("uniform row decodes to %v, want %v", got[0], -math.Log(V))
	}
	if err := DecodeRow(got, row[:10]); err == nil || !strings.Contains(err.Error(), "the row has 10 bytes") {
		t.Errorf("short row: %v", err)
	}
}

func writeBase(t *testing.T, tokens []int32, ctx, vocab int) []byte {
	t.Helper()
	var buf bytes.Buffer
	m := &fakeModel{vocab: vocab}
	if _, err := Perplexity(m, tokens, Options{Ctx: ctx, Base: &buf}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBaseRoundTrip(t *testing.T) {
	const ctx, V = 16, 21
	tokens := testTokens(3*ctx+5, V) // 3 whole chunks; the tail is not scored
	data := writeBase(t, tokens, ctx, V)
	if size, _ := BaseSize(ctx, V, 3); int64(len(data)) != size {
		t.Fatalf("base file of %d bytes, BaseSize says %d", len(data), size)
	}
	path := filepath.Join(t.TempDir(), "base.kld")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBase(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Ctx != ctx || b.Vocab != V || b.Chunks != 3 || len(b.Tokens) != 3*ctx {
		t.Fatalf("header ctx %d vocab %d chunks %d tokens %d", b.Ctx, b.Vocab, b.Chunks, len(b.Tokens))
	}
	for i, tok := range b.Tokens {
		if tok != tokens[i] {
			t.Fatalf("token %d read back as %d, wrote %d", i, tok, tokens[i])
		}
	}
	if err := b.Match(tokens, ctx, 0); err != nil {
		t.Errorf("the base's own tokens do not match: %v", err)
	}
	// Every row decodes to its position's log-probabilities.
	row := make([]byte, 2*RowLen(V))
	lp, exact, logits := make([]float32, V), make([]float32, V), make([]float32, V)
	for c := range 3 {
		for j := range ScoredPositions(ctx) {
			if err := b.ReadRow(c, j, row); err != nil {
				t.Fatal(err)
			}
			DecodeRow(lp, row)
			p := ctx/2 + j
			fakeRow(logits, tokens[c*ctx+p], p)
			LogProbs(exact, logits)
			for i := range lp {
				if exact[i] > -15 && math.Abs(float64(lp[i]-exact[i])) > 2e-4 {
					t.Fatalf("chunk %d row %d token %d: %v, want %v", c, j, i, lp[i], exact[i])
				}
			}
		}
	}
	if err := b.ReadRow(3, 0, row); err == nil || !strings.Contains(err.Error(), "the file has 3 chunks of 7 rows") {
		t.Errorf("row of a 4th chunk: %v", err)
	}

	// Mismatches name both sides' counts.
	for _, c := range []struct {
		tokens     []int32
		ctx, limit int
		want       string
	}{
		{tokens, 8, 0, "chunks of 8 tokens, the base file chunks of 16"},
		{tokens[:2*ctx+3], ctx, 0, "gives 32 tokens (2 chunks of 16) but the base file holds 48 tokens (3 chunks of 16)"},
		{testTokens(5*ctx, V), ctx, 0, "gives 80 tokens (5 chunks of 16) but the base file holds 48 tokens"},
		{testTokens(5*ctx, V), ctx, 4, "asks for 4 chunks (64 tokens) but the base file holds 48 tokens (3 chunks of 16)"},
		{tokens[:2*ctx], ctx, 3, "gives 32 tokens (2 chunks of 16), fewer than the 3 chunks asked for; the base file holds 48 tokens"},
		{append(append([]int32{}, tokens[:20]...), append([]int32{(tokens[20] + 1) % V}, tokens[21:]...)...), ctx, 0,
			"token 20 of this run's 48 tokens is"},
	} {
		if err := b.Match(c.tokens, c.ctx, c.limit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Match(%d tokens, ctx %d, limit %d): %v, want %q", len(c.tokens), c.ctx, c.limit, err, c.want)
		}
	}
	if err := b.Match(testTokens(5*ctx, V)[:0], ctx, 0); err == nil {
		t.Error("no tokens matched the base")
	}
	// A longer text limited to the base's first chunks matches them.
	if err := b.Match(testTokens(5*ctx, V), ctx, 2); err != nil {
		t.Errorf("the first 2 chunks of a longer text: %v", err)
	}
	wrong := testTokens(5*ctx, V)
	wrong[ctx+3]++
	if err := b.Match(wrong, ctx, 2); err == nil || !strings.Contains(err.Error(), "token 19 of this run's 32 tokens") {
		t.Errorf("a changed token in the first 2 chunks: %v", err)
	}

	// Damaged files.
	for _, c := range []struct {
		data []byte
		want string
	}{
		{data[:len(data)-1], "truncated or not a base file"},
		{append(append([]byte{}, data...), 0), "truncated or not a base file"},
		{append([]byte("_logitz_"), data[8:]...), `starts with "_logitz_"`},
		{data[:10], "cannot read its 20-byte header"},
		{append(append([]byte{}, data[:8]...), append([]byte{2, 0, 0, 0}, data[12:]...)...), "out of range"},
	} {
		if _, err := ReadBase(bytes.NewReader(c.data), int64(len(c.data))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("damaged base file: %v, want %q", err, c.want)
		}
	}
	bad := append([]byte{}, data...)
	bad[baseHeader] = V // the first token, outside the vocabulary
	if _, err := ReadBase(bytes.NewReader(bad), int64(len(bad))); err == nil || !strings.Contains(err.Error(), "token 0 is 21, outside its vocabulary of 21") {
		t.Errorf("token outside the vocabulary: %v", err)
	}
}

func TestPerplexityDriver(t *testing.T) {
	const ctx, V = 12, 17
	tokens := testTokens(4*ctx+7, V)
	m := &fakeModel{vocab: V}
	var progress []int
	res, err := Perplexity(m, tokens, Options{Ctx: ctx, AddBOS: true, BOS: 16, Progress: func(p Progress) { progress = append(progress, p.Chunk) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 4 || res.Positions != 4*5 || res.Tokens != len(tokens) || len(res.ChunkPPL) != 4 || len(progress) != 4 {
		t.Fatalf("result %+v, progress %v", res, progress)
	}
	// Each chunk starts with BOS, the rest are the text's tokens.
	for i, c := range m.chunks {
		if c[0] != 16 || !equal(c[1:], tokens[i*ctx+1:(i+1)*ctx]) {
			t.Errorf("chunk %d evaluated as %v", i, c)
		}
	}
	// The same figure computed directly in float64: positions 6..10 of each chunk predict the
	// token after them.
	sum, n := 0.0, 0
	row := make([]float32, V)
	for c := range 4 {
		for p := ctx / 2; p <= ctx-2; p++ {
			fakeRow(row, m.chunks[c][p], p)
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			z := 0.0
			for _, v := range row {
				z += math.Exp(float64(v) - m)
			}
			sum += m + math.Log(z) - float64(row[tokens[c*ctx+p+1]])
			n++
		}
		if want := math.Exp(sum / float64(n)); math.Abs(res.ChunkPPL[c]-want) > 1e-6*want {
			t.Errorf("running PPL after chunk %d = %v, want %v", c+1, res.ChunkPPL[c], want)
		}
	}
	if want := math.Exp(sum / float64(n)); math.Abs(res.PPL-want) > 1e-6*want {
		t.Errorf("PPL = %v, want %v", res.PPL, want)
	}
	if _, err := Perplexity(m, tokens[:2*ctx-1], Options{Ctx: ctx}); err == nil || !strings.Contains(err.Error(), "at least 24 tokens to evaluate perplexity with a context of 12; the text tokenizes to only 23") {
		t.Errorf("short text: %v", err)
	}
	// A limit of 2 chunks scores what a text of just those 2 chunks does.
	r2, err := Perplexity(m, tokens, Options{Ctx: ctx, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Perplexity(m, tokens[:2*ctx], Options{Ctx: ctx}); err != nil || r2.Chunks != 2 || r2.PPL != r.PPL || r2.Positions != 10 {
		t.Errorf("-chunks 2: %+v; 2-chunk text: %+v, %v", r2, r, err)
	}
	if _, err := Perplexity(m, tokens, Options{Ctx: 3}); err == nil || !strings.Contains(err.Error(), "a context of 3 tokens") {
		t.Errorf("ctx 3: %v", err)
	}
	if _, err := Perplexity(m, tokens, Options{Ctx: ctx, AddBOS: true, BOS: V}); err == nil || !strings.Contains(err.Error(), "BOS token 17 is outside the vocabulary of 17") {
		t.Errorf("bad BOS: %v", err)
	}
}

func TestKLDivergenceDriver(t *testing.T) {
	const ctx, V = 40, 29
	tokens := testTokens(3*ctx, V)
	data := writeBase(t, tokens, ctx, V)
	b, err := ReadBase(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ppl, err := Perplexity(&fakeModel{vocab: V}, tokens, Options{Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	// The same model against its base: KLD at the quantization's level, every top the same,
	// both perplexities the base run's.
	s, err := KLDivergence(&fakeModel{vocab: V}, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Positions != 3*19 || math.Abs(s.KLD) > 1e-5 || s.SameTop != 1 || math.Abs(s.PPL-ppl.PPL) > 1e-6*ppl.PPL || math.Abs(s.BasePPL-ppl.PPL) > 1e-3*ppl.PPL {
		t.Errorf("self-comparison: %+v; base run PPL %v", s, ppl.PPL)
	}
	// A different model (shifted logits) against the base: the KLD of every position, in float64.
	shifted := &shiftModel{fakeModel{vocab: V}}
	s, err = KLDivergence(shifted, b, Options{Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	sum, n := 0.0, 0
	a, q := make([]float32, V), make([]float32, V)
	for c := range 2 {
		for p := ctx / 2; p <= ctx-2; p++ {
			fakeRow(a, tokens[c*ctx+p], p)
			shifted.row(q, tokens[c*ctx+p], p)
			sum += klExact(a, q)
			n++
		}
	}
	if s.Positions != n || math.Abs(s.KLD-sum/float64(n)) > 2e-3*sum/float64(n) {
		t.Errorf("KLD over %d positions = %v, want %v (float64 from the logits)", s.Positions, s.KLD, sum/float64(n))
	}
	if s.SameTop >= 1 || len(s.KLDPercentiles) != 10 {
		t.Errorf("shifted model: same top %v, %d KLD points", s.SameTop, len(s.KLDPercentiles))
	}
	if _, err := KLDivergence(&fakeModel{vocab: V + 1}, b, Options{}); err == nil || !strings.Contains(err.Error(), "vocabulary has 30 tokens, the base file's 29") {
		t.Errorf("vocabulary mismatch: %v", err)
	}
	if _, err := KLDivergence(&fakeModel{vocab: V}, b, Options{Ctx: 20}); err == nil || !strings.Contains(err.Error(), "chunks of 20 tokens, the base file chunks of 40") {
		t.Errorf("ctx mismatch: %v", err)
	}
}

// shiftModel is fakeModel with every logit moved by a position-dependent amount.
type shiftModel struct{ fakeModel }

func (s *shiftModel) row(r []float32, tok int32, p int) {
	fakeRow(r, tok, p)
	for i := range r {
		r[i] += float32(math.Cos(float64(i*p))) * 0.7
	}
}

func (s *shiftModel) Eval(tokens []int32, from int, row func(int, []float32) error) error {
	r := make([]float32, s.vocab)
	for p := from; p < len(tokens); p++ {
		s.row(r, tokens[p], p)
		if err := row(p, r); err != nil {
			return err
		}
	}
	return nil
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
