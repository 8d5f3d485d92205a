package grammar

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// testVocab is bytes, common English and JSON pieces, multi-byte characters split at every
// byte, and random strings; the last two tokens are a control token (no text) and EOS.
func testVocab(n int) ([][]byte, []int32) {
	var p [][]byte
	for c := range 256 {
		p = append(p, []byte{byte(c)})
	}
	for _, s := range []string{"{", "}", `{"`, `"}`, `":`, `": "`, `",`, `","`, "true", "false", "null",
		"name", "age", "the", " the", "ing", "  ", "\n", "\n  ", "12", "123", "0.", "-1", "é", "日本", "😀",
		"\xc3", "\xa9", "\xe6\x97", "\x97\xa5", `\"`, `\n`, `\u00`, "[", "]", "[1", "],", `"a"`, `ab"`} {
		p = append(p, []byte(s))
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789{}[]:,\"\\.-+eE\n\t"
	for len(p) < n-2 {
		k := 1 + r.IntN(8)
		b := make([]byte, k)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		p = append(p, b)
	}
	p = append(p, nil, []byte("</s>"))
	return p, []int32{int32(len(p) - 1)}
}

func bit(mask []uint64, id int) bool { return mask[id>>6]&(1<<(id&63)) != 0 }

// TestConstraintMatchesBruteForce checks the trie walk's mask against trying every token
// with a fresh matcher, over a generation that takes a random allowed token each step.
func TestConstraintMatchesBruteForce(t *testing.T) {
	pieces, eog := testVocab(3000)
	v, err := NewVocab(pieces, eog)
	if err != nil {
		t.Fatal(err)
	}
	grammars := []string{
		`root ::= "{" ws ("\"" [a-z]+ "\"" ws ":" ws [0-9]+ ws)? "}"` + "\nws ::= [ \\n]?",
		`root ::= [^"\\]* "\""`,
		`root ::= ("日本" | "é" | "😀")+`,
		`root ::= "true" | "false" | "null" | "[" ([0-9] ("," [0-9])*)? "]"`,
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, src := range grammars {
		g := mustParse(t, src)
		c := NewConstraint(g, v)
		var text []byte
		for step := 0; step < 30; step++ {
			mask, err := c.Allowed()
			if err != nil {
				t.Fatal(err)
			}
			var allowed []int
			for id := range v.Size() {
				want := false
				if v.isEOG[id] {
					want = c.Complete()
				} else if len(pieces[id]) > 0 {
					m := g.NewMatcher()
					want = m.Accept(append(append([]byte(nil), text...), pieces[id]...))
				}
				if got := bit(mask, id); got != want {
					t.Fatalf("%s after %q: token %d %q allowed %v, want %v", src, text, id, pieces[id], got, want)
				}
				if want {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				break
			}
			id := allowed[r.IntN(len(allowed))]
			if err := c.Accept(int32(id)); err != nil {
				t.Fatal(err)
			}
			if v.isEOG[id] {
				break
			}
			text = append(text, pieces[id]...)
		}
	}
}

// TestConstraintErrors checks Accept's refusals and that nothing is allowed after EOS.
func TestConstraintErrors(t *testing.T) {
	pieces, eog := testVocab(400)
	v, err := NewVocab(pieces, eog)
	if err != nil {
		t.Fatal(err)
	}
	c := NewConstraint(mustParse(t, `root ::= "ab"`), v)
	ctl, eos := int32(len(pieces)-2), eog[0]
	for _, tc := range []struct {
		id   int32
		want string
	}{{-1, "outside the vocabulary"}, {int32(len(pieces)), "outside"}, {'b', "does not continue"},
		{ctl, "no text"}, {eos, "before the grammar is complete"}} {
		if err := c.Accept(tc.id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Accept(%d) = %v, want %q", tc.id, err, tc.want)
		}
	}
	for _, id := range []int32{'a', 'b', eos} {
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	mask, _ := c.Allowed()
	for i, w := range mask {
		if w != 0 {
			t.Fatalf("word %d of the mask after EOS is %x", i, w)
		}
	}
	if _, err := NewVocab(pieces, []int32{9999}); err == nil {
		t.Error("NewVocab accepted an EOG id outside the vocabulary")
	}
	if _, err := NewVocab(nil, nil); err == nil {
		t.Error("NewVocab accepted an empty vocabulary")
	}
}

// TestVocabTrie checks the preorder layout: every token is found by following its bytes.
func TestVocabTrie(t *testing.T) {
	pieces, eog := testVocab(2000)
	v, err := NewVocab(pieces, eog)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	var path []byte
	for i := 1; i < v.Nodes(); i++ {
		path = append(path[:v.depth[i]-1], v.b[i])
		if int(v.end[i]) <= i || int(v.end[i]) > v.Nodes() {
			t.Fatalf("node %d ends at %d", i, v.end[i])
		}
		for _, id := range v.toks[v.tokOff[i]:v.tokOff[i+1]] {
			if string(pieces[id]) != string(path) {
				t.Fatalf("token %d %q at node %d of path %q", id, pieces[id], i, path)
			}
			found++
		}
	}
	if found != len(pieces)-2 { // all but the control token and EOS
		t.Fatalf("%d tokens in the trie, want %d", found, len(pieces)-2)
	}
}

// FuzzConstraint checks the trie walk's mask against trying every token with a fresh
// matcher, for fuzzed grammars over a small vocabulary, along a path of allowed tokens
// chosen by the fuzzed seed.
func FuzzConstraint(f *testing.F) {
	for _, s := range []string{
		`root ::= [^"\\]* "\""`, `root ::= ("日本" | "é"+ | [😀-😂])* "."`, `root ::= [a-zé]{0,3} ("{" root "}")?`,
		`root ::= ("ab" | "a" "b"? | [^a-c\u0080-\u07ff])+`, `root ::= .{2,5}`, `root ::= [\u0800-\uffff]* "x"`,
	} {
		f.Add(s, uint64(1))
	}
	pieces, eog := testVocab(500)
	v, err := NewVocab(pieces, eog)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string, seed uint64) {
		g, err := Parse(src)
		if err != nil || g.Elements() > 2000 {
			return
		}
		r := rand.New(rand.NewPCG(seed, 7))
		c := NewConstraint(g, v)
		var text []byte
		for range 6 {
			mask, err := c.Allowed()
			if err != nil {
				return // too ambiguous: refused, as it should be
			}
			var allowed []int
			for id := range v.Size() {
				want := false
				if v.isEOG[id] {
					want = c.Complete()
				} else if len(pieces[id]) > 0 {
					want = g.NewMatcher().Accept(append(append([]byte(nil), text...), pieces[id]...))
				}
				if bit(mask, id) != want {
					t.Fatalf("after %q: token %d %q allowed %v, want %v", text, id, pieces[id], !want, want)
				}
				if want {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				return
			}
			id := allowed[r.IntN(len(allowed))]
			if err := c.Accept(int32(id)); err != nil {
				t.Fatal(err)
			}
			if v.isEOG[id] {
				return
			}
			text = append(text, pieces[id]...)
		}
	})
}
