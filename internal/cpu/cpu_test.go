package cpu

import "testing"

func TestVariantNames(t *testing.T) {
	for _, v := range []Variant{Ref, AVX2, AVX512} {
		got, err := ParseVariant(v.String())
		if err != nil || got != v {
			t.Errorf("ParseVariant(%q) = %v, %v", v.String(), got, err)
		}
	}
	if _, err := ParseVariant("sse9"); err == nil {
		t.Error("ParseVariant accepted sse9")
	}
}

func TestSupportedIsConsistent(t *testing.T) {
	if !Supports(Ref) {
		t.Fatal("ref must always be supported")
	}
	sup := Supported()
	if sup[0] != Ref || sup[len(sup)-1] != Best() {
		t.Fatalf("Supported() = %v, Best() = %v", sup, Best())
	}
	f := Detected()
	if Supports(AVX512) && !(f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512VNNI && Supports(AVX2)) {
		t.Fatal("AVX512 variant claimed without its features")
	}
}

// Force switches every later Current() until restored, and refuses what the CPU lacks.
func TestForce(t *testing.T) {
	for _, v := range Supported() {
		restore, err := Force(v)
		if err != nil {
			t.Fatal(err)
		}
		if Current() != v {
			t.Fatalf("Current() = %v after Force(%v)", Current(), v)
		}
		restore()
		if Current() != Best() {
			t.Fatalf("Current() = %v after restore, want %v", Current(), Best())
		}
	}
	if !Supports(AVX512) {
		if _, err := Force(AVX512); err == nil {
			t.Fatal("Force(AVX512) succeeded on a CPU without it")
		}
	}
}
