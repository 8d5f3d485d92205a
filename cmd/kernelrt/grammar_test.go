package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunGrammar: -json-schema and -grammar constrain the text of a random-weight model;
// bad files are usage errors naming the flag.
func TestRunGrammar(t *testing.T) {
	model := tinyFile(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	schema := write("s.json", `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"n":{"type":"integer"},
		"ok":{"type":"boolean"}},"required":["name","n","ok"],"additionalProperties":false}`)
	code, stdout, stderr := run("run", "-model", model, "-p", "JSON:", "-n", "400", "-seed", "3", "-temp", "1", "-json-schema", schema)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v struct {
		Name *string
		N    *int
		OK   *bool
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil || v.Name == nil || v.N == nil || v.OK == nil || len([]rune(*v.Name)) > 6 {
		t.Fatalf("output %q: %v, %+v", stdout, err, v)
	}
	if !strings.Contains(stderr, "stop: eog") {
		t.Errorf("the generation did not end at the grammar's end: %s", stderr)
	}

	gbnf := write("g.gbnf", `root ::= "answer: " ("yes" | "no") "."`)
	code, stdout, stderr = run("run", "-model", model, "-p", "Q?", "-n", "50", "-seed", "1", "-grammar", gbnf)
	if code != 0 || (stdout != "answer: yes.\n" && stdout != "answer: no.\n") {
		t.Fatalf("-grammar: exit %d, %q, %s", code, stdout, stderr)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "x", "-json-schema", write("bad.json", `{"type":"integer","multipleOf":3}`)}, `-json-schema ` + dir + `/bad.json: grammar: schema at #: keyword "multipleOf" is not supported`},
		{[]string{"-p", "x", "-grammar", write("bad.gbnf", "root ::= \"abc\n")}, `-grammar ` + dir + `/bad.gbnf: grammar: line 1, column 10: unterminated string literal`},
		{[]string{"-p", "x", "-grammar", gbnf, "-json-schema", schema}, "at most one of -json-schema and -grammar"},
		{[]string{"-tokens", "1", "-grammar", gbnf}, "-json-schema and -grammar need -p"},
	} {
		code, _, stderr := run(append([]string{"run", "-model", model}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := run("run", "-model", model, "-p", "x", "-grammar", filepath.Join(dir, "none")); code != 1 || !strings.Contains(stderr, "-grammar: open") {
		t.Errorf("missing grammar file: exit %d, %s", code, stderr)
	}
}
