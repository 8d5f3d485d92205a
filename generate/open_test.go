package generate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// TestOpenSyntheticFile: a synthetic GGUF file (random weights, byte-level tokenizer, ChatML
// template) goes through Open like a downloaded model: text in, text out, chat and
// cache reuse across turns, and Close releases everything.
func TestOpenSyntheticFile(t *testing.T) {
	cfg := orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 320,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 256, MaxBatch: 32}
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUF(b, cfg, orchestrator.RecipeQ8_0(), 3); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := Open(path, OpenOptions{Runtime: kernelrt.Options{Threads: 2, NoPin: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	text, err := g.Generate(context.Background(), "the weather is", Options{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.GeneratedTokens == 0 || st.PromptTokens == 0 || st.PromptTokens >= len("the weather is") {
		t.Fatalf("stats %+v (the merges should make fewer prompt tokens than bytes)", st)
	}
	t.Logf("generated %q", text)
	msgs := []chat.Message{{Role: "user", Content: "hello"}}
	for _, err := range g.Chat(context.Background(), msgs, Options{MaxTokens: 4}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	msgs = append(msgs, chat.Message{Role: "assistant", Content: "hi"}, chat.Message{Role: "user", Content: "again"})
	for _, err := range g.Chat(context.Background(), msgs, Options{MaxTokens: 4}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := g.Stats(); st.ReusedTokens == 0 {
		t.Errorf("the second turn reused no cached tokens: %+v", st)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
