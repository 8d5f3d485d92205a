package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// ---- tokenize ----

// cmdTokenize prints the token ids of a text as one JSON array on one line, the output of
// llama.cpp's `llama-tokenize --ids`. Only the file's metadata is read, so a
// vocabulary-only GGUF is enough.
func cmdTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", "-model FILE (-p TEXT | -f FILE) [-no-special] [-no-bos]", stderr)
	model := fs.String("model", "", "GGUF `FILE` with the vocabulary (a vocabulary-only file is enough)")
	prompt := fs.String("p", "", "`TEXT` to tokenize, taken as is (no escape processing)")
	file := fs.String("f", "", "read the text from `FILE`, as raw bytes")
	noSpecial := fs.Bool("no-special", false, "tokenize special-token text such as <|im_end|> as plain text")
	noBOS := fs.Bool("no-bos", false, "never add BOS (by default it follows the file's add_bos flag; like llama-tokenize, EOS is added only with BOS)")
	var promptSet bool
	if err := parse(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { promptSet = promptSet || f.Name == "p" })
	if *model == "" {
		return usagef("-model is required")
	}
	if promptSet == (*file != "") {
		return usagef("give the text with exactly one of -p TEXT and -f FILE")
	}
	text := *prompt
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		text = string(b)
	}
	f, err := gguf.Open(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	if !utf8.ValidString(text) {
		fmt.Fprintln(stderr, "kernelrt tokenize: warning: the text is not valid UTF-8; its bad bytes are tokenized as llama.cpp does")
	}
	// llama-tokenize passes add_special = (the file's add_bos && !--no-bos), which also
	// governs EOS; the same here, so the two print the same ids.
	ids, err := tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: tok.AddBOS() && !*noBOS, ParseSpecial: !*noSpecial})
	if err != nil {
		return err
	}
	b := make([]byte, 0, 2+len(ids)*8)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	b = append(b, "]\n"...)
	_, err = stdout.Write(b)
	return err
}
