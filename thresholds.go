package kernelrt

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

// Thresholds is the calibration data package calibrate writes and New loads: this machine's
// dispatch cost and each op's per-element cost, and the MinElements derived from them.
type Thresholds struct {
	CPU        string                   `json:"cpu"`
	Threads    int                      `json:"threads"`
	Kernels    string                   `json:"kernels"`
	DispatchNs float64                  `json:"dispatch_ns"`
	Measured   string                   `json:"measured"`
	Ops        map[string]OpCalibration `json:"ops"`
}

// OpCalibration is one op's measured cost and the thresholds derived from it.
type OpCalibration struct {
	NsPerElement float64        `json:"ns_per_element"`
	MinElements  map[string]int `json:"min_elements"` // by mode: "decode", "prefill"
	// Variant is the kernel variant whose serial call was fastest ("avx2", "avx512"; "" = no
	// preference: the CPU's best). A Runtime uses it unless Options force kernels.
	Variant string `json:"variant,omitempty"`
	// VariantNs is each variant's median serial time of the op's representative call, in ns.
	VariantNs map[string]float64 `json:"variant_ns,omitempty"`
}

//go:embed calibration
var builtinCalibration embed.FS

// CalibrationFile is the file name the built-in data for this CPU and thread count has.
func CalibrationFile(model string, threads int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(model) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); len(s) > 0 && s[len(s)-1] != '-' {
				b.WriteByte('-')
			}
		}
	}
	return fmt.Sprintf("%s-%dt.json", strings.Trim(b.String(), "-"), threads)
}

// loadThresholds applies a calibration file to the table and says where they came from.
// The built-in file is chosen for this CPU and the runtime's thread count: thresholds
// measured with two workers say nothing about one or four.
func (rt *Runtime) loadThresholds(file string) (string, error) {
	switch file {
	case "default":
		return "table defaults", nil
	case "":
		name := CalibrationFile(cpu.Model(), rt.threads)
		data, err := builtinCalibration.ReadFile(path.Join("calibration", name))
		if err != nil {
			return "table defaults (no built-in calibration for " + name + ")", nil
		}
		var th Thresholds
		if err := json.Unmarshal(data, &th); err != nil {
			return "", fmt.Errorf("kernelrt.New: built-in calibration %s: %w", name, err)
		}
		if err := rt.ApplyThresholds(&th); err != nil {
			return "", fmt.Errorf("kernelrt.New: built-in calibration %s: %w", name, err)
		}
		return "built-in calibration " + name, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("kernelrt.New: thresholds: %w", err)
	}
	defer f.Close()
	th, err := ReadThresholds(f)
	if err != nil {
		return "", fmt.Errorf("kernelrt.New: thresholds %s: %w", file, err)
	}
	if err := rt.ApplyThresholds(th); err != nil {
		return "", fmt.Errorf("kernelrt.New: thresholds %s: %w", file, err)
	}
	return "calibration file " + file, nil
}

// ReadThresholds decodes calibration JSON.
func ReadThresholds(r io.Reader) (*Thresholds, error) {
	var th Thresholds
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&th); err != nil {
		return nil, err
	}
	return &th, nil
}

// WriteJSON encodes the calibration as indented JSON.
func (th *Thresholds) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(th)
}

// ApplyThresholds copies MinElements and the preferred variants from th into rt's table
// (package calibrate measures them) and picks the kernels again; unknown ops, modes or
// variants and non-positive values are errors and change nothing, ops th does not mention
// keep theirs. It must not race with calls on rt.
func (rt *Runtime) ApplyThresholds(th *Thresholds) error {
	t := rt.table
	if err := applyThresholds(&t, th); err != nil {
		return err
	}
	old := rt.table
	rt.table = t
	if err := rt.resolveKernels(); err != nil {
		rt.table = old
		return err
	}
	return nil
}

// applyThresholds copies MinElements and Variant from th into the table t.
func applyThresholds(t *[numOps]OpRow, th *Thresholds) error {
	for name, oc := range th.Ops {
		op, err := ParseOp(name)
		if err != nil {
			return err
		}
		if oc.Variant != "" {
			if _, err := cpu.ParseVariant(oc.Variant); err != nil {
				return fmt.Errorf("op %s: %v", name, err)
			}
		}
		t[op].Variant = oc.Variant
		for mode, v := range oc.MinElements {
			var m Mode
			switch mode {
			case "decode":
				m = Decode
			case "prefill":
				m = Prefill
			default:
				return fmt.Errorf("op %s: unknown mode %q (want decode or prefill)", name, mode)
			}
			if v <= 0 {
				return fmt.Errorf("op %s %s: min_elements must be positive, got %d", name, mode, v)
			}
			t[op].MinElements[m] = v
		}
	}
	return nil
}
