// Command bench is `make bench`: it runs the benchmark suite (bench/suite) and prints the
// report on stdout, progress on stderr.
//
//	go run ./bench [-quick] [-threads N] [-json FILE] [-svg DIR] [-model FILE]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/bench/suite"
	"github.com/kernelrt/kernelrt/orchestrator"
)

func main() {
	var (
		jsonFile = flag.String("json", "", "also write the report as JSON to `FILE`")
		quick    = flag.Bool("quick", false, "CI smoke run: fewer repetitions and shapes (every section still runs)")
		threads  = flag.Int("threads", 0, "the \"all threads\" count (0 = one per usable physical core)")
		model    = flag.String("model", "", "measure this GGUF `FILE` in the whole-model section instead of the synthetic models")
		svgDir   = flag.String("svg", "", "also write the charts (gemv.svg: GEMV % of bandwidth per shape; model.svg: tokens/s vs threads) into `DIR`")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	opts := suite.Options{Quick: *quick, Threads: *threads}
	if *model != "" {
		path := *model
		opts.Model = func(build orchestrator.BuildOptions) (*orchestrator.Model, string, error) {
			m, err := orchestrator.LoadGGUF(path, orchestrator.LoadOptions{Build: build, File: arena.FileOptions{WillNeed: true}})
			return m, path, err
		}
	}
	if err := run(opts, *jsonFile, *svgDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(opts suite.Options, jsonFile, svgDir string) error {
	rep, err := suite.Run(opts, os.Stderr)
	if rep != nil && svgDir != "" {
		for name, write := range map[string]func(io.Writer) error{"gemv.svg": rep.WriteGemvSVG, "model.svg": rep.WriteModelSVG} {
			if serr := writeFile(filepath.Join(svgDir, name), write); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}
	if rep != nil {
		if werr := rep.WriteText(os.Stdout); werr != nil {
			err = errors.Join(err, werr)
		}
		if jsonFile != "" {
			if jerr := writeJSON(rep, jsonFile); jerr != nil {
				err = errors.Join(err, jerr)
			}
		}
	}
	return err
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeJSON(rep *suite.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
