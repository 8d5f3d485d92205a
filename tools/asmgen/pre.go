package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// translate runs the whole pipeline for one C file. It returns nil when the file defines no
// functions (a placeholder).
func translate(cfg *config, src string, api map[string][]cparam) (*unit, error) {
	base := strings.TrimSuffix(filepath.Base(src), ".c")
	work := filepath.Join(cfg.workDir, base)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	decls := api
	if c, err := os.ReadFile(src); err == nil {
		own, err := parseDeclarations(string(c))
		if err != nil {
			return nil, err
		}
		if len(own) > 0 {
			decls = map[string][]cparam{}
			for k, v := range api {
				decls[k] = v
			}
			for k, v := range own {
				decls[k] = v
			}
		}
	} else {
		return nil, err
	}

	absSrc, err := filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	args := append([]string{}, clangFlags...)
	args = append(args, "-I", mustAbs(cfg.csrc), "-S", absSrc, "-o", filepath.Join(work, "clang.s"))
	if _, err := runCmd(work, cfg.clang, args...); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(work, "clang.s"))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")

	lines, fns, err := preprocess(lines)
	if err != nil {
		return nil, err
	}
	if len(fns) == 0 {
		return nil, nil
	}
	u := &unit{src: src, base: base}
	for _, f := range fns {
		ps, ok := decls[f.name]
		if !ok {
			return nil, fmt.Errorf("function %s has no declaration (KRT_DECLARE in kernelrt.h or a void prototype in the file)", f.name)
		}
		if len(ps) > 6 && !f.framePointer {
			return nil, fmt.Errorf("%s: %d parameters but no rbp frame: c2goasm finds stack arguments only as [rbp + N]", f.name, len(ps))
		}
		u.funcs = append(u.funcs, cfunc{name: f.name, params: ps})
	}

	// c2goasm reads the prototypes from the companion file next to its output.
	u.goSrc, err = protoFile(cfg, u)
	if err != nil {
		return nil, err
	}
	pre := filepath.Join(work, "pre.s")
	if err := os.WriteFile(pre, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	goOut := filepath.Join(work, base+"_amd64.go")
	sOut := filepath.Join(work, base+"_amd64.s")
	if err := os.WriteFile(goOut, u.goSrc, 0o644); err != nil {
		return nil, err
	}
	if _, err := runCmd(work, cfg.c2goasm, pre, sOut); err != nil {
		return nil, err
	}
	c2, err := os.ReadFile(sOut)
	if err != nil {
		return nil, err
	}
	tables := constTables(lines)
	post, err := postprocess(strings.Split(strings.TrimRight(string(c2), "\n"), "\n"), tables)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(sOut, []byte(strings.Join(post, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if _, err := runCmd(work, cfg.asm2plan9s, sOut); err != nil {
		return nil, err
	}
	enc, err := os.ReadFile(sOut)
	if err != nil {
		return nil, err
	}
	if u.stats, err = verifyEncodings(cfg, work, string(enc)); err != nil {
		return nil, err
	}
	if _, err := runCmd(work, cfg.asmfmt, "-w", sOut); err != nil {
		return nil, err
	}
	fmtd, err := os.ReadFile(sOut)
	if err != nil {
		return nil, err
	}
	u.sSrc = []byte(asmHeader(cfg, src) + strings.TrimLeft(string(fmtd), "\n"))
	return u, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// asmFunc describes one function in clang's output.
type asmFunc struct {
	name         string
	framePointer bool // prologue sets rbp = rsp
}

var (
	reGlobl     = regexp.MustCompile(`^\s*\.globl\s+(\S+)`)
	reHexData   = regexp.MustCompile(`^(\s*\.(byte|short|value|long|int|quad)\s+)(0x[0-9a-fA-F]+)(.*)$`)
	reFuncEnd   = regexp.MustCompile(`^\.Lfunc_end\d+:`)
	reRet       = regexp.MustCompile(`^\s*ret\s*$`)
	rePop       = regexp.MustCompile(`^\s*pop\s+[a-z0-9]+\s*$`)
	reAddRsp    = regexp.MustCompile(`^\s*add\s+rsp, [0-9]+\s*$`)
	reLeaRsp    = regexp.MustCompile(`^\s*lea\s+rsp, `)
	reMovRspRbp = regexp.MustCompile(`^\s*mov\s+rsp, rbp\s*$`)
	reMovRbpRsp = regexp.MustCompile(`^\s*mov\s+rbp, rsp\s*$`)
	reVzu       = regexp.MustCompile(`^\s*vzeroupper\s*$`)
	reAndRsp    = regexp.MustCompile(`^\s*and\s+rsp, -([0-9]+)\s*$`)
	reCall      = regexp.MustCompile(`^\s*call\s+(\S+)`)
	reJump      = regexp.MustCompile(`^\s*j[a-z]+\s+(\S+)`)
	reRipRef    = regexp.MustCompile(`\[rip \+ ([^\]]+)\]`)
	reLCPI      = regexp.MustCompile(`^\.?LCPI\d+_\d+(\s*\+\s*\d+)?$`)
	reLabelDef  = regexp.MustCompile(`^(\.?[A-Za-z_.$][\w.$]*):`)
	reAsmCmt    = regexp.MustCompile(`\s*#.*$`)
	reP2Align   = regexp.MustCompile(`^\.p2align\s+(\d+)(?:,\s*0x90)?$`)
)

// clibCalls are the calls c2goasm translates (to clib·_memset / clib·_memcpy, which postprocess
// points at clib_amd64.s).
var clibCalls = map[string]bool{"memset@PLT": true, "memcpy@PLT": true, "memset": true, "memcpy": true}

// code strips an assembly comment ("# ...") and surrounding space.
func code(l string) string { return strings.TrimSpace(reAsmCmt.ReplaceAllString(l, "")) }

func isEpilogue(l string) bool {
	c := code(l)
	return rePop.MatchString(c) || reAddRsp.MatchString(c) || reLeaRsp.MatchString(c) ||
		reMovRspRbp.MatchString(c) || reVzu.MatchString(c) || reRet.MatchString(c)
}

// preprocess makes clang's output digestible for c2goasm:
//
//   - problem 1: hex data constants become decimal (c2goasm parses them with base 10; .quad
//     values >= 2^63 become negative decimals, which is what c2goasm's ParseInt accepts);
//   - every function gets exactly one ret, as its last instruction: c2goasm builds the Go
//     epilogue from the first ret and copies any later "ret" as a raw C3 byte, which would
//     return without restoring SP/BP (other rets become jumps to the single epilogue);
//   - a realigning prologue (and rsp, -32/-64) whose epilogue is "mov rsp, rbp" gets
//     "lea rsp, [rbp]" instead: c2goasm only realigns the Go stack when it sees a lea, and
//     without that the 32/64-byte aligned spills (vmovaps) would fault on Go's 8-byte
//     aligned stack;
//   - calls, tail calls and rip-relative data other than constant-pool entries are rejected
//     with an error naming the function, since none of them can run from Go assembly;
//   - the #APP / #NO_APP markers clang puts around inline assembly are dropped: the Go
//     assembler rejects them, and the compiler barrier the kernels use
//     (__asm__ volatile("" ::: "memory"), csrc/gemv_k.c) emits nothing between them.
func preprocess(in []string) ([]string, []asmFunc, error) {
	lines := make([]string, 0, len(in))
	for i, l := range in {
		// An empty inline-asm statement (a compiler barrier, asm volatile("" ::: "memory"))
		// leaves only its #APP / #NO_APP markers, which the Go assembler rejects. A non-empty
		// one would need translating: refuse it.
		if t := strings.TrimSpace(l); t == "#APP" || t == "#NO_APP" {
			if t == "#APP" && i+1 < len(in) && strings.TrimSpace(in[i+1]) != "#NO_APP" {
				return nil, nil, fmt.Errorf("line %d: inline assembly is not supported (only empty barriers): %q", i+2, in[i+1])
			}
			continue
		}
		if m := reHexData.FindStringSubmatch(l); m != nil {
			v, err := strconv.ParseUint(m[3][2:], 16, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			d := strconv.FormatUint(v, 10)
			if m[2] == "quad" {
				d = strconv.FormatInt(int64(v), 10)
			}
			l = m[1] + d + m[4]
		}
		lines = append(lines, l)
	}

	var out []string
	var fns []asmFunc
	i := 0
	for i < len(lines) {
		m := reGlobl.FindStringSubmatch(lines[i])
		if m == nil {
			out = append(out, lines[i])
			i++
			continue
		}
		name := m[1]
		start := -1
		for j := i; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], name+":") {
				start = j
				break
			}
		}
		if start < 0 {
			return nil, nil, fmt.Errorf("label %s: not found", name)
		}
		end := -1
		for j := start; j < len(lines); j++ {
			if reFuncEnd.MatchString(lines[j]) {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, nil, fmt.Errorf("%s: no .Lfunc_end label", name)
		}
		body, fn, err := fixFunction(name, len(fns), lines[start+1:end])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", name, err)
		}
		fns = append(fns, fn)
		out = append(out, lines[i:start+1]...)
		out = append(out, body...)
		i = end
	}
	return out, fns, nil
}

func fixFunction(name string, idx int, body []string) ([]string, asmFunc, error) {
	fn := asmFunc{name: name}
	localLabels := map[string]bool{}
	for _, l := range body {
		if m := reLabelDef.FindStringSubmatch(l); m != nil {
			localLabels[m[1]] = true
		}
	}
	var rets []int
	alignedPrologue := false
	seenCode := false
	for i, l := range body {
		c := code(l)
		if c == "" || strings.HasPrefix(c, ".") && !strings.Contains(c, ":") {
			continue
		}
		if reLabelDef.MatchString(c) {
			continue
		}
		if !seenCode && reMovRbpRsp.MatchString(c) {
			fn.framePointer = true
		}
		if m := reAndRsp.FindStringSubmatch(c); m != nil && !seenCode {
			if n, _ := strconv.Atoi(m[1]); n > 8 {
				alignedPrologue = true
			}
		}
		if !strings.HasPrefix(c, "push") && !strings.HasPrefix(c, "mov") && !strings.HasPrefix(c, "and") && !strings.HasPrefix(c, "sub") {
			seenCode = true
		}
		if m := reCall.FindStringSubmatch(c); m != nil && !clibCalls[m[1]] {
			return nil, fn, fmt.Errorf("calls %s: only memset and memcpy can be called (c2goasm maps them to clib_amd64.s); was a helper not inlined?", m[1])
		}
		if m := reJump.FindStringSubmatch(c); m != nil && !localLabels[m[1]] {
			return nil, fn, fmt.Errorf("jumps to %s outside the function (tail call?)", m[1])
		}
		for _, r := range reRipRef.FindAllStringSubmatch(c, -1) {
			if !reLCPI.MatchString(strings.TrimSpace(r[1])) {
				return nil, fn, fmt.Errorf("reads %s rip-relative: c2goasm translates only constant-pool (LCPI) data; build such tables with _mm*_set* intrinsics or locals", r[1])
			}
		}
		if reRet.MatchString(c) {
			rets = append(rets, i)
		}
	}
	if len(rets) == 0 {
		return nil, fn, fmt.Errorf("no ret instruction")
	}

	// epilogue runs: [s, r] where s..r-1 are epilogue instructions and r is a ret
	type run struct{ s, r int }
	var runs []run
	for _, r := range rets {
		s := r
		for s > 0 && isEpilogue(body[s-1]) && !reRet.MatchString(code(body[s-1])) {
			s--
		}
		runs = append(runs, run{s, r})
	}
	sig := func(rn run) (string, bool) {
		var parts []string
		vzu := false
		for _, l := range body[rn.s:rn.r] {
			c := code(l)
			if reVzu.MatchString(c) {
				vzu = true
				continue
			}
			parts = append(parts, strings.Join(strings.Fields(c), " "))
		}
		return strings.Join(parts, ";"), vzu
	}
	canon := runs[len(runs)-1]
	canonSig, anyVzu := sig(canon)
	for _, rn := range runs[:len(runs)-1] {
		s, v := sig(rn)
		if s != canonSig {
			return nil, fn, fmt.Errorf("epilogues differ (%q vs %q): cannot merge the returns", s, canonSig)
		}
		anyVzu = anyVzu || v
	}
	lastCode := -1
	for i := len(body) - 1; i >= 0; i-- {
		c := code(body[i])
		if c != "" && !strings.HasPrefix(c, ".") {
			lastCode = i
			break
		}
	}

	out := make([]string, 0, len(body)+8)
	if len(runs) == 1 && canon.r == lastCode {
		out = append(out, body...)
	} else {
		label := fmt.Sprintf(".LBB_krtret%d", idx)
		skip := map[int]bool{}
		jumpAt := map[int]bool{}
		for _, rn := range runs {
			for k := rn.s; k <= rn.r; k++ {
				skip[k] = true
			}
			jumpAt[rn.s] = true
		}
		for k, l := range body {
			if jumpAt[k] {
				out = append(out, "\tjmp\t"+label)
			}
			if skip[k] {
				continue
			}
			out = append(out, l)
		}
		out = append(out, label+":")
		out = append(out, body[canon.s:canon.r+1]...)
		canon = run{len(out) - (canon.r - canon.s + 1), len(out) - 1}
		body = out
	}

	// Loop alignment: c2goasm drops ".p2align 4, 0x90" inside function bodies, so clang's
	// 16-byte aligned loop heads would land anywhere. Go's PCALIGN does the same job (padding
	// with multi-byte NOPs) and c2goasm passes upper-case lines through untouched.
	for k, l := range out {
		if m := reP2Align.FindStringSubmatch(code(l)); m != nil {
			n, _ := strconv.Atoi(m[1])
			if n > 5 {
				n = 5 // Go aligns functions to 32 bytes
			}
			if n >= 3 {
				out[k] = fmt.Sprintf("\tPCALIGN\t$%d", 1<<n)
			}
		}
	}

	// One epilogue now, at the end: realign fix and vzeroupper for every path.
	var fixed []string
	for k, l := range out {
		c := code(l)
		if k >= canon.s && k <= canon.r {
			if alignedPrologue && reMovRspRbp.MatchString(c) {
				l = "\tlea\trsp, [rbp]"
			}
			if reRet.MatchString(c) && anyVzu {
				if s, v := sig(run{canon.s, canon.r}); !v {
					_ = s
					fixed = append(fixed, "\tvzeroupper")
				}
			}
		}
		fixed = append(fixed, l)
	}
	return fixed, fn, nil
}
