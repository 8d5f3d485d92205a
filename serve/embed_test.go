package serve

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// unitNorm fails unless v has the hidden size and an L2 norm of 1 within 1e-5.
func unitNorm(t *testing.T, what string, v []float64) {
	t.Helper()
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	if len(v) != tinyConfig().Hidden || math.Abs(math.Sqrt(ss)-1) > 1e-5 {
		t.Errorf("%s: %d floats, norm %v", what, len(v), math.Sqrt(ss))
	}
}

// maxDiff is the largest |a[i]-b[i]| (Inf when the lengths differ).
func maxDiff[A, B float32 | float64](a []A, b []B) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// /v1/embeddings through the official OpenAI Go client: one vector per input of the hidden
// size and unit norm, equal for equal inputs (in one request, across requests, and while a
// generation runs beside them), different for different inputs, the same as
// orchestrator.Model.Embedding on a one-slot model of the file, and base64 decoding to
// the float vectors exactly.
func TestEmbeddingsOpenAIClient(t *testing.T) {
	ts, _, e := newTestServer(t, 2, EngineOptions{PrefillChunk: 8}, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	texts := []string{"The quick brown fox jumps over the lazy dog", "Hello", "The quick brown fox jumps over the lazy dog"}
	params := openai.EmbeddingNewParams{Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}}
	res, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != len(texts) || res.Object != "list" || res.Model != e.Name() {
		t.Fatalf("%d vectors, object %q model %q", len(res.Data), res.Object, res.Model)
	}
	m, tok := loadTiny(t, 1)
	total := 0
	for i, d := range res.Data {
		unitNorm(t, texts[i], d.Embedding)
		if d.Index != int64(i) {
			t.Errorf("data[%d].index = %d", i, d.Index)
		}
		ids, err := tok.Encode(texts[i], true, true)
		if err != nil {
			t.Fatal(err)
		}
		total += len(ids)
		want := make([]float32, m.EmbeddingSize())
		if err := m.Embedding(kernelrt.Serial{}, ids, orchestrator.PoolLast, want); err != nil {
			t.Fatal(err)
		}
		if diff := maxDiff(d.Embedding, want); diff > 1e-4 {
			t.Errorf("%q: differs from Model.Embedding by %v", texts[i], diff)
		}
	}
	if res.Usage.PromptTokens != int64(total) || res.Usage.TotalTokens != int64(total) {
		t.Errorf("usage %+v, want %d tokens", res.Usage, total)
	}
	if maxDiff(res.Data[0].Embedding, res.Data[2].Embedding) != 0 || maxDiff(res.Data[0].Embedding, res.Data[1].Embedding) < 1e-3 {
		t.Errorf("equal inputs differ, or different inputs agree")
	}

	// base64: little-endian float32s, the same vectors.
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	resp, b := post(t, ts.URL+"/v1/embeddings", `{"model": "m", "input": ["The quick brown fox jumps over the lazy dog", "Hello"], "encoding_format": "base64"}`)
	var raw struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || resp.StatusCode != 200 || len(raw.Data) != 2 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for i, d := range raw.Data {
		bs, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil || len(bs) != 4*tinyConfig().Hidden {
			t.Fatalf("base64 %d: %v, %d bytes", i, err, len(bs))
		}
		v := make([]float32, len(bs)/4)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(bs[4*j:]))
		}
		f := make([]float32, len(res.Data[i].Embedding)) // the float format's float32s, as sent
		for j, x := range res.Data[i].Embedding {
			f[j] = float32(x)
		}
		if diff := maxDiff(v, f); diff != 0 {
			t.Errorf("base64 %d differs from the float vector by %v", i, diff)
		}
	}

	// Beside a running generation (the other slot): the same vectors.
	gen, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt": "Once upon a time", "max_tokens": 100, "ignore_eos": true, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Body.Close()
	if _, err := bufio.NewReader(gen.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatFloat
	again, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if diff := maxDiff(again.Data[i].Embedding, res.Data[i].Embedding); diff != 0 {
			t.Errorf("%q: differs by %v beside a generation", texts[i], diff)
		}
	}
	io.Copy(io.Discard, gen.Body)

	// Token-array inputs give what their text gives.
	ids, _ := tok.Encode(texts[1], true, true)
	arr := make([]int64, len(ids))
	for i, id := range ids {
		arr[i] = int64(id)
	}
	byIDs, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: arr}})
	if err != nil || len(byIDs.Data) != 1 || maxDiff(byIDs.Data[0].Embedding, res.Data[1].Embedding) != 0 {
		t.Errorf("token input: %v", err)
	}
	checkIdle(t, e)
}

// Inputs longer than a step's chunk run over several steps; with mean pooling (a model
// whose file would say pooling_type 1) the vector is the normalised mean of every token's
// normalised hidden state, as Model.Embedding computes it in one chunk, and differs from
// the last token's.
func TestEmbeddingsMeanPooling(t *testing.T) {
	m, tok := loadTiny(t, 2)
	e := newTestEngine(t, meanModel{m}, tok, EngineOptions{PrefillChunk: 5})
	ids, err := tok.Encode(strings.Repeat("a longer input, ", 6), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) <= 3*5 {
		t.Fatalf("input of %d tokens: want several chunks", len(ids))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := e.Embed(ctx, [][]int32{ids})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := loadTiny(t, 1)
	mean, last := make([]float32, one.EmbeddingSize()), make([]float32, one.EmbeddingSize())
	if err := one.Embedding(kernelrt.Serial{}, ids, orchestrator.PoolMean, mean); err != nil {
		t.Fatal(err)
	}
	if err := one.Embedding(kernelrt.Serial{}, ids, orchestrator.PoolLast, last); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got[0], mean); d > 1e-4 {
		t.Errorf("chunked mean differs from the one-chunk mean by %v", d)
	}
	if d := maxDiff(mean, last); d < 1e-3 {
		t.Errorf("mean and last pooling agree (%v)", d)
	}
	if err := one.Embedding(kernelrt.Serial{}, ids, orchestrator.PoolNone, mean); err == nil {
		t.Error("pooling none gave one vector")
	}
	checkIdle(t, e)
}

// meanModel is the tiny model as a file asking for mean pooling.
type meanModel struct{ *orchestrator.Model }

func (meanModel) PoolingType() orchestrator.Pooling { return orchestrator.PoolMean }

// genOnly is a Model without hidden-state access.
type genOnly struct{ m *orchestrator.Model }

func (g genOnly) ForwardBatch(ops kernelrt.Ops, toks []int32, seqs []orchestrator.Seq) ([]float32, error) {
	return g.m.ForwardBatch(ops, toks, seqs)
}
func (g genOnly) MaxCtx() int   { return g.m.MaxCtx() }
func (g genOnly) Vocab() int    { return g.m.Vocab() }
func (g genOnly) Slots() int    { return g.m.Slots() }
func (g genOnly) MaxBatch() int { return g.m.MaxBatch() }

// Bad embedding requests get 400 naming the field, before any work; a model without
// embeddings gets 400 too.
func TestEmbeddingsBadRequests(t *testing.T) {
	ts, _, e := newTestServer(t, 1, EngineOptions{}, Options{})
	long := strings.Repeat("word ", 300)
	for _, c := range []struct{ body, param string }{
		{`{"input": "hi", "encoding_format": "int8"}`, "encoding_format"},
		{`{"input": "hi", "dimensions": 3}`, "dimensions"},
		{`{}`, "input"},
		{`{"input": []}`, "input"},
		{`{"input": [[]]}`, "input[0]"},
		{`{"input": 7}`, "input"},
		{`{"input": [1, 99999]}`, "input[0]"},
		{`{"input": ["ok", "` + long + `"]}`, "input[1]"},
	} {
		resp, b := post(t, ts.URL+"/v1/embeddings", c.body)
		var eb errorBody
		if json.Unmarshal(b, &eb) != nil || resp.StatusCode != 400 || eb.Error.Param == nil || *eb.Error.Param != c.param {
			t.Errorf("%.60s: %d %s", c.body, resp.StatusCode, b)
		}
	}
	if st := e.Stats(); st.Submitted != 0 {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
	m, tok := loadTiny(t, 1)
	ts2 := httptest.NewServer(New(newTestEngine(t, genOnly{m}, tok, EngineOptions{}), Options{}))
	defer ts2.Close()
	if resp, b := post(t, ts2.URL+"/v1/embeddings", `{"input": "hi"}`); resp.StatusCode != 400 || !strings.Contains(string(b), "no embeddings") {
		t.Errorf("a model without embeddings: %d %s", resp.StatusCode, b)
	}
}
