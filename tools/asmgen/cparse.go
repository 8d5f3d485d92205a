package main

import (
	"fmt"
	"regexp"

	"github.com/kernelrt/kernelrt/internal/opspec"
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
	reComment  = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	reVoidDecl = regexp.MustCompile(`(?m)^\s*void\s+(\w+)\s*\(([^)]*)\)\s*;`)
)

// parseDeclarations finds KRT_DECLARE(name, (params)) (declaring name_ref, name_avx2 and
// name_avx512; parsed by internal/opspec, as for the other backends) and plain
// "void name(params);" prototypes (the extra C files').
func parseDeclarations(src string) (map[string][]cparam, error) {
	out := map[string][]cparam{}
	fams, err := opspec.ParseDeclarations(src)
	if err != nil {
		return nil, err
	}
	for name, ps := range fams {
		for _, v := range opspec.Variants {
			out[name+"_"+v] = cparams(ps)
		}
	}
	for _, m := range reVoidDecl.FindAllStringSubmatch(reComment.ReplaceAllString(src, " "), -1) {
		ps, err := opspec.ParseParams(m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m[1], err)
		}
		out[m[1]] = cparams(ps)
	}
	return out, nil
}

func cparams(ps []opspec.Param) []cparam {
	out := make([]cparam, len(ps))
	for i, p := range ps {
		out[i] = cparam{name: p.Name, ptr: p.Kind == opspec.Ptr}
	}
	return out
}
