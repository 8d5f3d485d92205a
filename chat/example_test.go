package chat_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt/chat"
)

// Rendering a ChatML template (as a GGUF's tokenizer.chat_template holds it) for a short
// conversation, ending with the opening of the assistant's turn.
func Example() {
	const src = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`
	tmpl, err := chat.Parse(src)
	if err != nil {
		panic(err)
	}
	prompt, err := tmpl.Render([]chat.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "Hi!"},
	}, chat.Options{AddGenerationPrompt: true, EOS: "<|im_end|>"})
	if err != nil {
		panic(err)
	}
	fmt.Print(prompt)
	// Output:
	// <|im_start|>system
	// You are terse.<|im_end|>
	// <|im_start|>user
	// Hi!<|im_end|>
	// <|im_start|>assistant
}

// A model without a template: llama.cpp uses ChatML then, and so can the caller.
func ExampleBuiltin() {
	tmpl, _ := chat.Parse("")
	if tmpl == nil {
		tmpl, _ = chat.Builtin(chat.ChatML)
	}
	prompt, _ := tmpl.Render([]chat.Message{{Role: "user", Content: "2+2?"}}, chat.Options{AddGenerationPrompt: true})
	fmt.Printf("%q\n", prompt)
	// Output:
	// "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
}
