// Package opspec reads kernelrt's one op list: the C contract (csrc/kernelrt.h, whose
// KRT_DECLARE lines give every kernel's parameters) and the manifest (ops.manifest, one line
// per op: its table name, Go name and float scalars). tools/opgen and tools/asmgen generate
// all per-op plumbing from it, so an op's name is written by hand only where its meaning is:
// the C kernel, the Go argument check, the table row, the Go port and the parity reference.
package opspec

import (
	"bufio"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Kind is how a C parameter crosses from Go.
type Kind int

// Parameter kinds.
const (
	Ptr     Kind = iota // a pointer: kern.Args.P
	Int                 // an int64_t: kern.Args.I
	Float               // a `const float *` scalar listed in the manifest: kern.Args.F, passed by address
	Scratch             // the pointer named `scratch`: the worker's private scratch, not in Args
	Lo                  // the slice start (second to last parameter)
	Hi                  // the slice end (last parameter)
)

// Param is one C parameter.
type Param struct {
	Name  string // as in C; Go-safe (a Go keyword gets a trailing _)
	CType string // e.g. "const krt_block_q8_0 *", "int64_t"
	Kind  Kind
	Index int // position in its Args array (P, I or F); -1 for Scratch, Lo, Hi
}

// Base is the pointed-to C type without qualifiers ("krt_block_q8_0", "float", "void").
func (p Param) Base() string {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p.CType), "*"))
	t = strings.TrimSpace(strings.TrimPrefix(t, "const "))
	return strings.TrimSpace(strings.TrimSuffix(t, " const"))
}

// Op is one op: one C kernel family (krt_<Name>_ref/_avx2/_avx512) and one dispatch table row.
type Op struct {
	Name   string // table name, e.g. "gemv_q8_0"
	GoName string // e.g. "GemvQ8_0"
	C      string // the kernel family, "krt_" + Name
	Params []Param
	// NP, NI and NF count the Args slots the op uses.
	NP, NI, NF int
	Line       int // manifest line, for errors
}

// HasScratch reports whether the kernel takes a private per-worker scratch.
func (o *Op) HasScratch() bool {
	for _, p := range o.Params {
		if p.Kind == Scratch {
			return true
		}
	}
	return false
}

// Spec is the whole op list in manifest order.
type Spec struct {
	Ops []*Op
	// MaxP, MaxI and MaxF size kern.Args: the most of each kind any op needs.
	MaxP, MaxI, MaxF int
}

// Files of the op list, relative to the module root.
const (
	HeaderFile   = "csrc/kernelrt.h"
	ManifestFile = "ops.manifest"
)

// Load reads the op list from the module rooted at root.
func Load(root string) (*Spec, error) {
	h, err := os.ReadFile(filepath.Join(root, HeaderFile))
	if err != nil {
		return nil, err
	}
	decls, err := ParseDeclarations(string(h))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", HeaderFile, err)
	}
	m, err := os.Open(filepath.Join(root, ManifestFile))
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return parseManifest(m.Name(), bufio.NewScanner(m), decls)
}

func parseManifest(name string, sc *bufio.Scanner, decls map[string][]Param) (*Spec, error) {
	s := &Spec{}
	seen := map[string]int{}
	seenGo := map[string]int{}
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s:%d: want `op GoName [float-scalar...]`, got %q", name, ln, line)
		}
		op := &Op{Name: f[0], GoName: f[1], C: "krt_" + f[0], Line: ln}
		if p, ok := seen[op.Name]; ok {
			return nil, fmt.Errorf("%s:%d: op %s already listed on line %d", name, ln, op.Name, p)
		}
		if p, ok := seenGo[op.GoName]; ok {
			return nil, fmt.Errorf("%s:%d: Go name %s already used on line %d", name, ln, op.GoName, p)
		}
		seen[op.Name], seenGo[op.GoName] = ln, ln
		if !token.IsIdentifier(op.GoName) || !token.IsExported(op.GoName) {
			return nil, fmt.Errorf("%s:%d: Go name %q is not an exported identifier", name, ln, op.GoName)
		}
		params, ok := decls[op.C]
		if !ok {
			return nil, fmt.Errorf("%s:%d: %s has no KRT_DECLARE(%s, ...) in %s", name, ln, op.Name, op.C, HeaderFile)
		}
		scalars := map[string]bool{}
		for _, sname := range f[2:] {
			scalars[sname] = true
		}
		if err := op.classify(params, scalars); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", name, ln, op.C, err)
		}
		s.Ops = append(s.Ops, op)
		s.MaxP, s.MaxI, s.MaxF = max(s.MaxP, op.NP), max(s.MaxI, op.NI), max(s.MaxF, op.NF)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.Ops) == 0 {
		return nil, fmt.Errorf("%s: no ops", name)
	}
	return s, nil
}

// classify assigns every parameter its kind: the last two are the slice range, `scratch` is
// the private scratch, listed names are float scalars, the rest pointers and ints.
func (o *Op) classify(params []Param, scalars map[string]bool) error {
	n := len(params)
	if n < 2 || params[n-2].Kind != Int || params[n-1].Kind != Int {
		return fmt.Errorf("the last two parameters must be the int64_t slice range")
	}
	for i, p := range params {
		switch {
		case i == n-2:
			p.Kind = Lo
		case i == n-1:
			p.Kind = Hi
		case p.Name == "scratch":
			if p.Kind != Ptr {
				return fmt.Errorf("scratch must be a pointer")
			}
			p.Kind = Scratch
		case scalars[p.Name]:
			if p.Kind != Ptr || p.Base() != "float" {
				return fmt.Errorf("float scalar %s must be declared `const float *%s`", p.Name, p.Name)
			}
			delete(scalars, p.Name)
			p.Kind, p.Index = Float, o.NF
			o.NF++
		case p.Kind == Ptr:
			p.Index = o.NP
			o.NP++
		default:
			p.Index = o.NI
			o.NI++
		}
		if p.Kind == Scratch || p.Kind == Lo || p.Kind == Hi {
			p.Index = -1
		}
		o.Params = append(o.Params, p)
	}
	for s := range scalars {
		return fmt.Errorf("float scalar %s is not a parameter", s)
	}
	return nil
}

var (
	reComment    = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	reKrtDeclare = regexp.MustCompile(`(?s)KRT_DECLARE\(\s*(\w+)\s*,\s*\((.*?)\)\s*\)`)
	reParam      = regexp.MustCompile(`^(.*?)(\w+)$`)
)

// ParseDeclarations returns the parameters of every KRT_DECLARE(name, (params)) in src, by
// family name (the macro declares name_ref, name_avx2 and name_avx512).
func ParseDeclarations(src string) (map[string][]Param, error) {
	src = reComment.ReplaceAllString(src, " ")
	out := map[string][]Param{}
	for _, m := range reKrtDeclare.FindAllStringSubmatch(src, -1) {
		if m[1] == "name" { // the macro's own definition
			continue
		}
		ps, err := ParseParams(m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m[1], err)
		}
		out[m[1]] = ps
	}
	return out, nil
}

// ParseParams parses a C parameter list whose parameters are all pointers or int64_t (all
// c2goasm can pass), at most 14 of them.
func ParseParams(s string) ([]Param, error) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" || s == "void" {
		return nil, nil
	}
	var out []Param
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		m := reParam.FindStringSubmatch(p)
		if m == nil {
			return nil, fmt.Errorf("cannot parse parameter %q", p)
		}
		typ := strings.TrimSpace(m[1])
		kind := Ptr
		switch {
		case strings.HasSuffix(typ, "*"):
		case typ == "int64_t" || typ == "const int64_t":
			kind = Int
		default:
			return nil, fmt.Errorf("parameter %q: only pointers and int64_t can cross c2goasm", p)
		}
		name := m[2]
		if token.IsKeyword(name) {
			name += "_"
		}
		out = append(out, Param{Name: name, CType: typ, Kind: kind, Index: -1})
	}
	if len(out) > 14 {
		return nil, fmt.Errorf("%d parameters: c2goasm passes at most 14", len(out))
	}
	return out, nil
}

// CallArgs renders the arguments of a call to one variant of o from a thunk whose
// parameters are (a kern.Args, scratch kern.P, lo, hi int): arg maps each parameter to its Go
// expression (a.P[i], a.I[i], ...), after which wrap may convert it (cgo casts).
func (o *Op) CallArgs(wrap func(p Param, expr string) string) []string {
	var out []string
	for _, p := range o.Params {
		var e string
		switch p.Kind {
		case Ptr:
			e = fmt.Sprintf("a.P[%d]", p.Index)
		case Int:
			e = fmt.Sprintf("a.I[%d]", p.Index)
		case Float:
			e = fmt.Sprintf("a.F[%d]", p.Index)
		case Scratch:
			e = "scratch"
		case Lo:
			e = "lo"
		case Hi:
			e = "hi"
		}
		if wrap != nil {
			e = wrap(p, e)
		}
		out = append(out, e)
	}
	return out
}

// Variants are the C suffixes every KRT_DECLARE family has, in cpu.Variant order.
var Variants = []string{"ref", "avx2", "avx512"}
