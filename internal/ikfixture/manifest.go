// Package ikfixture is the format of the ik_llama.cpp oracle fixtures in
// perplexity/testdata/ik: tools/ikfixtures writes manifest.json, perplexity's TestOracleKL
// reads it.
package ikfixture

// Fixture is one quantized file and its oracle distributions. Copies maps a source file
// (an earlier fixture's name, or "" for this one) to the {dst, len, src} triples that
// restore len bytes at dst of this file from offset src of that file.
type Fixture struct {
	Name       string                `json:"name"`
	GGUF       string                `json:"gguf"`
	Size       int64                 `json:"size"`
	SHA256     string                `json:"sha256"`
	Copies     map[string][][3]int64 `json:"copies"`
	Base       string                `json:"base"`
	BaseSize   int64                 `json:"base_size"`
	BaseSHA256 string                `json:"base_sha256"`
}

// Manifest is manifest.json.
type Manifest struct {
	Oracle   string    `json:"oracle"`
	Fixtures []Fixture `json:"fixtures"`
}
