package chat

import "testing"

// gemma3Like has the constructs of Gemma 3's chat template that matter here: the
// "<start_of_turn>" marker and a conditional expression in parentheses, which gonja cannot
// parse (so Parse must fall back to the built-in Gemma format, as llama.cpp does without
// --jinja).
const gemma3Like = `{{ bos_token }}{%- for message in messages -%}
{{ '<start_of_turn>' + message['role'] + '
' + (message['content'] if loop.first else "") }}<end_of_turn>
{%- endfor -%}`

// TestGemmaBuiltin: a Gemma template gonja cannot parse renders as llama.cpp's built-in
// Gemma format (src/llama-chat.cpp at c392e509): system merged into the next user turn,
// assistant named model, content trimmed.
func TestGemmaBuiltin(t *testing.T) {
	tmpl, err := Parse(gemma3Like)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Format() != Gemma {
		t.Fatalf("format %v, want gemma", tmpl.Format())
	}
	msgs := []Message{{Role: "system", Content: " Be brief.\n"}, {Role: "user", Content: " Hi there \n"},
		{Role: "assistant", Content: "Hello."}, {Role: "user", Content: "Bye"}}
	got, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true, BOS: "<bos>", EOS: "<eos>"})
	if err != nil {
		t.Fatal(err)
	}
	want := "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n" +
		"<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	b, err := Builtin(Gemma)
	if err != nil {
		t.Fatal(err)
	}
	got, err = b.Render(msgs[2:3], Options{})
	if want := "<start_of_turn>model\nHello.<end_of_turn>\n"; err != nil || got != want {
		t.Errorf("Builtin(Gemma) without a generation prompt: %q, %v; want %q", got, err, want)
	}
	if Detect("x <start_of_turn> y") != Gemma || Gemma.String() != "gemma" {
		t.Errorf("Detect or String: %v %q", Detect("x <start_of_turn> y"), Gemma.String())
	}
}
