package kernelrt

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSnippets: every Go program in README.md compiles as pasted (a user's first
// contact with the API must not fail on a missing import or an unused variable).
func TestReadmeSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	root, _ := filepath.Abs(".")
	sum, _ := os.ReadFile("go.sum")
	n := 0
	for i, b := range blocks {
		if !strings.HasPrefix(b[1], "package main") {
			t.Errorf("README Go block %d is not a whole program (start it with package main)", i+1)
			continue
		}
		dir := t.TempDir()
		mod := "module readmecheck\n\ngo 1.26\n\nrequire github.com/kernelrt/kernelrt v0.0.0\n\nreplace github.com/kernelrt/kernelrt => " + root + "\n"
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644)
		os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
		os.WriteFile(filepath.Join(dir, "main.go"), []byte(b[1]), 0o644)
		cmd := exec.Command("go", "vet", "-mod=mod", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README Go block %d does not build: %v\n%s\n%s", i+1, err, out, b[1])
		}
		n++
	}
	if n == 0 {
		t.Fatal("README.md has no Go programs")
	}
}
