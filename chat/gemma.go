package chat

import "strings"

// renderGemma is llama.cpp's built-in Gemma format (LLM_CHAT_TEMPLATE_GEMMA, detected by
// "<start_of_turn>"): "assistant" is "model"; a system message is not a turn but is put,
// trimmed, with a blank line after it, at the start of the next non-model turn; content is
// trimmed of C isspace characters; no BOS (the tokenizer adds it).
func renderGemma(msgs []Message, addGen bool) string {
	var b strings.Builder
	system := ""
	for _, m := range msgs {
		if m.Role == "system" {
			system = strings.Trim(m.Content, " \t\n\v\f\r")
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system != "" && role != "model" {
			b.WriteString(system + "\n\n")
			system = ""
		}
		b.WriteString(strings.Trim(m.Content, " \t\n\v\f\r") + "<end_of_turn>\n")
	}
	if addGen {
		b.WriteString("<start_of_turn>model\n")
	}
	return b.String()
}
