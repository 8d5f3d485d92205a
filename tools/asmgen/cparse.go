package main

import (
	"fmt"
	"go/token"
	"regexp"
	"strings"
)

// cparam is one C parameter: every parameter must be a pointer or int64_t, because c2goasm
// hands the C code 64-bit integer registers only.
type cparam struct {
	name string // Go-safe name
	ptr  bool   // pointer (unsafe.Pointer in Go) or int64_t (int in Go)
}

// cfunc is one exported C function found in clang's output.
type cfunc struct {
	name   string   // e.g. krt_gemv_q8_0_avx2
	params []cparam // from the declaration
}

var (
	reComment    = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	reKrtDeclare = regexp.MustCompile(`(?s)KRT_DECLARE\(\s*(\w+)\s*,\s*\((.*?)\)\s*\)`)
	reVoidDecl   = regexp.MustCompile(`(?m)^\s*void\s+(\w+)\s*\(([^)]*)\)\s*;`)
	reParam      = regexp.MustCompile(`^(.*?)(\w+)$`)
)

// parseDeclarations finds KRT_DECLARE(name, (params)) (declaring name_ref, name_avx2 and
// name_avx512) and plain "void name(params);" prototypes.
func parseDeclarations(src string) (map[string][]cparam, error) {
	src = reComment.ReplaceAllString(src, " ")
	out := map[string][]cparam{}
	add := func(name, params string) error {
		ps, err := parseParams(params)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		out[name] = ps
		return nil
	}
	for _, m := range reKrtDeclare.FindAllStringSubmatch(src, -1) {
		if m[1] == "name" { // the macro's own definition
			continue
		}
		for _, v := range []string{"_ref", "_avx2", "_avx512"} {
			if err := add(m[1]+v, m[2]); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range reVoidDecl.FindAllStringSubmatch(src, -1) {
		if err := add(m[1], m[2]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseParams(s string) ([]cparam, error) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" || s == "void" {
		return nil, nil
	}
	var out []cparam
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		m := reParam.FindStringSubmatch(p)
		if m == nil {
			return nil, fmt.Errorf("cannot parse parameter %q", p)
		}
		typ := strings.TrimSpace(m[1])
		var ptr bool
		switch {
		case strings.HasSuffix(typ, "*"):
			ptr = true
		case typ == "int64_t" || typ == "const int64_t":
		default:
			return nil, fmt.Errorf("parameter %q: only pointers and int64_t can cross c2goasm", p)
		}
		name := m[2]
		if token.IsKeyword(name) {
			name += "_"
		}
		out = append(out, cparam{name: name, ptr: ptr})
	}
	if len(out) > 14 {
		return nil, fmt.Errorf("%d parameters: c2goasm passes at most 14", len(out))
	}
	return out, nil
}
