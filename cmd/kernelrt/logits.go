package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
)

// runResult is the -logits JSON: the prompt, the logits of every prompt position, the
// generated ids and, for each, the logits that chose it (the first are the last prompt
// position's; the others come from decoding the previous id).
type runResult struct {
	PromptIDs     []int32
	PrefillLogits [][]float32
	DecodeIDs     []int32
	DecodeLogits  [][]float32
}

// writeLogits writes res to f (created before the run by createOutput) as {"prompt_ids":[..], "prefill_logits":[[..]..], "decode_ids":[..],
// "decode_logits":[[..]..]}. Floats are written in the shortest form that reads back as the
// same float32; a non-finite logit (which JSON cannot hold) is written as null.
func writeLogits(f *os.File, res *runResult) error {
	path := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	var b []byte
	ids := func(key string, v []int32) {
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for i, id := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	rows := func(key string, v [][]float32) error {
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for r, row := range v {
			if r > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for i, x := range row {
				if i > 0 {
					b = append(b, ',')
				}
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					b = append(b, "null"...)
				} else {
					b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
				}
				if len(b) > 1<<16 {
					if _, err := w.Write(b); err != nil {
						return err
					}
					b = b[:0]
				}
			}
			b = append(b, ']')
		}
		b = append(b, ']')
		return nil
	}
	b = append(b, '{')
	ids("prompt_ids", res.PromptIDs)
	b = append(b, ",\n"...)
	err := rows("prefill_logits", res.PrefillLogits)
	if err == nil {
		b = append(b, ",\n"...)
		ids("decode_ids", res.DecodeIDs)
		b = append(b, ",\n"...)
		err = rows("decode_logits", res.DecodeLogits)
	}
	if err == nil {
		b = append(b, "}\n"...)
		_, err = w.Write(b)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-logits %s: %w", path, err)
	}
	return nil
}
