package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kernelrt/kernelrt/grammar"
)

// grammarFlags are run's structured-output flags: a JSON schema or a GBNF grammar the
// generated text must follow.
type grammarFlags struct {
	schema, gbnf *string
	fs           *flag.FlagSet
}

func addGrammarFlags(fs *flag.FlagSet) *grammarFlags {
	return &grammarFlags{fs: fs,
		schema: fs.String("json-schema", "", "constrain the output to JSON valid against the JSON schema in `FILE`"),
		gbnf:   fs.String("grammar", "", "constrain the output to the GBNF grammar (llama.cpp's notation) in `FILE`"),
	}
}

// load reads and compiles the schema or grammar (nil if neither flag is set); a bad file is
// a usage error naming the flag.
func (g *grammarFlags) load() (*grammar.Grammar, error) {
	if *g.schema != "" && *g.gbnf != "" {
		return nil, usagef("give at most one of -json-schema and -grammar")
	}
	name, path, limit := "-json-schema", *g.schema, grammar.MaxSchema
	if *g.gbnf != "" {
		name, path, limit = "-grammar", *g.gbnf, grammar.MaxSource
	}
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(src) > limit {
		return nil, usagef("%s %s: the file is larger than the limit of %d bytes", name, path, limit)
	}
	var gr *grammar.Grammar
	if name == "-grammar" {
		gr, err = grammar.Parse(string(src))
	} else {
		gr, err = grammar.FromJSONSchema(src)
	}
	if err != nil {
		return nil, usagef("%s %s: %v", name, path, err)
	}
	return gr, nil
}

// set reports whether either flag was given.
func (g *grammarFlags) set() bool { return *g.schema != "" || *g.gbnf != "" }
