package main

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

type verifyStats struct {
	total, identical, equivalent int
}

var reOpcodeDir = regexp.MustCompile(`\b(QUAD|LONG|WORD|BYTE) \$0x([0-9a-fA-F]+)`)

// encodedInstr is one instruction asm2plan9s encoded.
type encodedInstr struct {
	text  string // Intel syntax, as handed to asm2plan9s
	bytes []byte
}

// parseEncoded extracts (instruction, bytes) pairs from asm2plan9s' output: lines of the form
// "    LONG $0x...; BYTE $0x.. // instruction".
func parseEncoded(s string) ([]encodedInstr, error) {
	var out []encodedInstr
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, instrPrefix) {
			return nil, fmt.Errorf("asm2plan9s left %q unencoded", strings.TrimSpace(l))
		}
		parts := strings.SplitN(l, "//", 2)
		if len(parts) != 2 {
			continue
		}
		ops := reOpcodeDir.FindAllStringSubmatch(parts[0], -1)
		if len(ops) == 0 {
			continue
		}
		var b []byte
		for _, op := range ops {
			h, err := hex.DecodeString(op[2])
			if err != nil {
				return nil, err
			}
			for i := len(h) - 1; i >= 0; i-- { // little endian
				b = append(b, h[i])
			}
		}
		text := strings.TrimSpace(stripBlockComments(parts[1]))
		out = append(out, encodedInstr{text: text, bytes: b})
	}
	return out, nil
}

// verifyEncodings assembles every instruction again with clang's integrated assembler (the
// assembler behind clang's own object files) and compares the bytes with asm2plan9s'. Where
// they differ, both byte strings are disassembled with objdump; the same disassembly means an
// equivalent alternative encoding (e.g. GNU as and LLVM choosing different ModRM forms of a
// register-register move), anything else is an error.
func verifyEncodings(cfg *config, work, encoded string) (verifyStats, error) {
	var st verifyStats
	ins, err := parseEncoded(encoded)
	if err != nil {
		return st, err
	}
	var src strings.Builder
	src.WriteString(".intel_syntax noprefix\n.text\n")
	for i, in := range ins {
		fmt.Fprintf(&src, "krtv%d:\n\t%s\n", i, in.text)
	}
	fmt.Fprintf(&src, "krtv%d:\n", len(ins))
	sfile := filepath.Join(work, "verify.s")
	ofile := filepath.Join(work, "verify.o")
	if err := os.WriteFile(sfile, []byte(src.String()), 0o644); err != nil {
		return st, err
	}
	if _, err := runCmd(work, cfg.clang, "-c", "-x", "assembler", sfile, "-o", ofile); err != nil {
		return st, err
	}
	f, err := elf.Open(ofile)
	if err != nil {
		return st, err
	}
	defer f.Close()
	text, err := f.Section(".text").Data()
	if err != nil {
		return st, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return st, err
	}
	addr := make([]int, len(ins)+1)
	for i := range addr {
		addr[i] = -1
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "krtv") {
			if k, err := strconv.Atoi(s.Name[4:]); err == nil && k <= len(ins) {
				addr[k] = int(s.Value)
			}
		}
	}
	var bad []string
	for i, in := range ins {
		if addr[i] < 0 || addr[i+1] < 0 {
			return st, fmt.Errorf("verify: label krtv%d missing", i)
		}
		ref := text[addr[i]:addr[i+1]]
		st.total++
		if bytes.Equal(ref, in.bytes) {
			st.identical++
			continue
		}
		a, err := disasm(cfg, work, ref)
		if err != nil {
			return st, err
		}
		b, err := disasm(cfg, work, in.bytes)
		if err != nil {
			return st, err
		}
		if a == b && a != "" {
			st.equivalent++
			if cfg.verbose {
				fmt.Printf("asmgen: %q: clang % x, asm2plan9s % x: both %s\n", in.text, ref, in.bytes, a)
			}
			continue
		}
		bad = append(bad, fmt.Sprintf("%q: clang % x (%s), asm2plan9s % x (%s)", in.text, ref, a, in.bytes, b))
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		return st, fmt.Errorf("asm2plan9s encodings differ from clang's:\n  %s", strings.Join(bad, "\n  "))
	}
	return st, nil
}

var reObjdumpLine = regexp.MustCompile(`^\s*[0-9a-f]+:\s+(?:[0-9a-f]{2} )+\s*(.*)$`)

// disasm returns objdump's Intel-syntax disassembly of b, instruction texts only.
func disasm(cfg *config, work string, b []byte) (string, error) {
	bin := filepath.Join(work, "disasm.bin")
	if err := os.WriteFile(bin, b, 0o644); err != nil {
		return "", err
	}
	out, err := runCmd(work, "objdump", "-D", "-b", "binary", "-m", "i386:x86-64", "-M", "intel", bin)
	if err != nil {
		return "", err
	}
	var ins []string
	for _, l := range strings.Split(string(out), "\n") {
		if m := reObjdumpLine.FindStringSubmatch(l); m != nil && strings.TrimSpace(m[1]) != "" {
			ins = append(ins, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	return strings.Join(ins, "; "), nil
}
