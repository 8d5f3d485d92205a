// Command ikfixtures packs GGUF files written by ik_llama.cpp's llama-quantize, and the
// token distributions its llama-perplexity wrote for them (--kl-divergence-base), into the
// small fixtures of perplexity's TestOracleKL (perplexity/testdata/ik). regen.sh, beside
// it, makes the inputs with the oracle; make test never runs either.
//
//	go run ./tools/ikfixtures -out perplexity/testdata/ik -oracle "ik_llama.cpp 8337e4cd" DIR/qwen3-Q8_0.gguf ...
//
// Each NAME.gguf needs NAME.kld beside it. A quantized tensor is random data that does not
// compress, so every tensor whose bytes already appeared (in an earlier tensor of the same
// file, or in an earlier file: the synthetic models give every layer the same weights and
// every file the same embedding) is zeroed in the stored file and listed as a copy in
// manifest.json; the test copies it back and checks the file's SHA-256, so it runs exactly
// the bytes the oracle quantized. Files and distributions are stored gzipped.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/internal/ikfixture"
)

// minDedup is the smallest tensor worth a copy entry (norm vectors are not).
const minDedup = 1024

type region struct {
	file string
	off  int64
}

func main() {
	out := flag.String("out", "", "write the fixtures and manifest.json to `DIR`")
	oracle := flag.String("oracle", "", "the oracle's name and commit, recorded in the manifest")
	flag.Parse()
	if *out == "" || *oracle == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: ikfixtures -out DIR -oracle NAME NAME.gguf... (NAME.kld beside each)")
		os.Exit(2)
	}
	if err := run(*out, *oracle, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ikfixtures:", err)
		os.Exit(1)
	}
}

func run(out, oracle string, paths []string) error {
	m := ikfixture.Manifest{Oracle: oracle}
	seen := map[[32]byte]region{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".gguf")
		if name == filepath.Base(p) {
			return fmt.Errorf("%s: want a .gguf file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := gguf.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		fx := ikfixture.Fixture{Name: name, GGUF: name + ".gguf.gz", Size: int64(len(data)), SHA256: sum(data), Copies: map[string][][3]int64{}}
		stored := bytes.Clone(data)
		for _, t := range f.Tensors {
			if t.Size < minDedup {
				continue
			}
			off := int64(f.DataOffset) + int64(t.Offset)
			b := data[off : off+int64(t.Size)]
			h := sha256.Sum256(b)
			if r, ok := seen[h]; ok {
				from := r.file
				if from == name {
					from = ""
				}
				fx.Copies[from] = append(fx.Copies[from], [3]int64{off, int64(t.Size), r.off})
				clear(stored[off : off+int64(t.Size)])
				continue
			}
			seen[h] = region{name, off}
		}
		if err := writeGz(filepath.Join(out, fx.GGUF), stored); err != nil {
			return err
		}
		base, err := os.ReadFile(strings.TrimSuffix(p, ".gguf") + ".kld")
		if err != nil {
			return err
		}
		fx.Base, fx.BaseSize, fx.BaseSHA256 = name+".kld.gz", int64(len(base)), sum(base)
		if err := writeGz(filepath.Join(out, fx.Base), base); err != nil {
			return err
		}
		m.Fixtures = append(m.Fixtures, fx)
	}
	// One line per fixture: a fixture is added or dropped by a line.
	o, err := json.Marshal(m.Oracle)
	if err != nil {
		return err
	}
	var j bytes.Buffer
	fmt.Fprintf(&j, "{\"oracle\": %s, \"fixtures\": [\n", o)
	for i, fx := range m.Fixtures {
		l, err := json.Marshal(fx)
		if err != nil {
			return err
		}
		j.Write(l)
		if i < len(m.Fixtures)-1 {
			j.WriteByte(',')
		}
		j.WriteByte('\n')
	}
	j.WriteString("]}\n")
	return os.WriteFile(filepath.Join(out, "manifest.json"), j.Bytes(), 0o644)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func writeGz(path string, b []byte) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
