package generate_test

import (
	"context"
	"fmt"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
)

// A multi-turn chat (scriptModel and byteTokenizer are the stand-ins of Example): the
// tokenizer has no chat template, so ChatML is used, and each turn prefills only what
// follows the tokens already in the KV cache.
func ExampleGenerator_Chat() {
	model := &scriptModel{reply: "Hi!", row: make([]float32, 257)}
	g, err := generate.New(model, kernelrt.Serial{}, byteTokenizer{})
	if err != nil {
		panic(err)
	}
	var msgs []chat.Message
	for _, user := range []string{"Hello", "How are you?"} {
		msgs = append(msgs, chat.Message{Role: "user", Content: user})
		reply := ""
		for piece, err := range g.Chat(context.Background(), msgs, generate.Options{}) {
			if err != nil {
				panic(err)
			}
			reply += piece
		}
		msgs = append(msgs, chat.Message{Role: "assistant", Content: reply})
		st := g.Stats()
		fmt.Printf("%s -> %s (prompt %d tokens, %d from the cache)\n", user, reply, st.PromptTokens, st.ReusedTokens)
	}
	// Output:
	// Hello -> Hi! (prompt 55 tokens, 0 from the cache)
	// How are you? -> Hi! (prompt 131 tokens, 58 from the cache)
}
