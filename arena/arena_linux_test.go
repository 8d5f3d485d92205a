package arena

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/internal/testutil"
)

// procStatusKB reads a "Key:   N kB" line of /proc/self/status.
func procStatusKB(t *testing.T, key string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

func TestAutoPageKindMatchesSystem(t *testing.T) {
	const size = 4 << 20
	free, err := freeHugePages()
	if err != nil {
		t.Fatal(err)
	}
	a := mustNew(t, size, Options{})
	want := Kind4K
	switch {
	case free >= size/HugePageSize:
		want = KindHugeTLB
	case thpMode() == "always" || thpMode() == "madvise":
		want = KindTHP
	}
	if a.PageKind() != want {
		t.Fatalf("Auto got %v, want %v (HugePages_Free=%d, THP %q)", a.PageKind(), want, free, thpMode())
	}
	if a.Cap() != size || a.Used() != 0 || a.Left() != size {
		t.Fatalf("Cap/Used/Left = %d/%d/%d, want %d/0/%d", a.Cap(), a.Used(), a.Left(), size, size)
	}
}

// The Linux fallback chain, forced by Options.Pages.
func TestPagePoliciesLinux(t *testing.T) {
	const size = 4 << 20
	t.Run("thp", func(t *testing.T) {
		a, err := New(size, Options{Pages: ForceTHP, Prefault: true})
		if m := thpMode(); m != "always" && m != "madvise" {
			wantErr(t, err, ErrMap, "ForceTHP")
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if a.PageKind() != KindTHP || a.PageKind().String() != "thp-madvise" {
			t.Fatalf("ForceTHP got %v", a.PageKind())
		}
		if uintptr(a.m.base)%HugePageSize != 0 {
			t.Fatalf("THP mapping base %#x is not 2 MiB aligned", uintptr(a.m.base))
		}
		huge, err := a.HugeBacked()
		if err != nil {
			t.Fatal(err)
		}
		if huge < 0 || huge > a.m.length {
			t.Fatalf("HugeBacked %d outside [0, %d]", huge, a.m.length)
		}
		t.Logf("THP backing after prefault: %d of %d bytes", huge, a.m.length)
	})
	t.Run("plain is not huge", func(t *testing.T) {
		a := mustNew(t, size, Options{Pages: ForcePlain, Prefault: true})
		huge, err := a.HugeBacked()
		if err != nil {
			t.Fatal(err)
		}
		if huge != 0 {
			t.Fatalf("ForcePlain arena has %d bytes on huge pages", huge)
		}
	})
	t.Run("hugetlb", func(t *testing.T) {
		free, err := freeHugePages()
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(size, Options{Pages: ForceHugeTLB})
		if free < size/HugePageSize {
			wantErr(t, err, ErrMap, "MAP_HUGETLB", "HugePages_Free=")
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if a.PageKind() != KindHugeTLB || a.PageKind().String() != "hugetlb" {
			t.Fatalf("ForceHugeTLB got %v", a.PageKind())
		}
	})
}

func TestHugePagesBacked(t *testing.T) {
	n, err := HugePagesBacked()
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		t.Fatalf("HugePagesBacked = %d", n)
	}
}

func TestMlock(t *testing.T) {
	const size = 1 << 20
	before := procStatusKB(t, "VmLck")
	a := mustNew(t, size, Options{Mlock: true, Pages: ForcePlain})
	if got := procStatusKB(t, "VmLck") - before; got < size>>10 {
		t.Fatalf("VmLck grew by %d kB, want at least %d", got, size>>10)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := procStatusKB(t, "VmLck"); got != before {
		t.Fatalf("VmLck %d kB after Close, was %d", got, before)
	}
}

func TestLayoutMapsNothing(t *testing.T) {
	before := procStatusKB(t, "VmSize")
	p := &Plan{}
	p.Add(Buffer{Name: "huge", ElemSize: 1 << 20, Count: 1 << 20, Region: Weights}) // 1 TiB
	p.Add(Buffer{Name: "kv", ElemSize: 2, Count: 1 << 30, Region: KV})
	l, err := p.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 1<<40+2<<30 {
		t.Fatalf("Total %d, want %d", l.Total, 1<<40+2<<30)
	}
	if grew := procStatusKB(t, "VmSize") - before; grew > 1<<20 {
		t.Fatalf("Layout of a 1 TiB plan grew VmSize by %d kB", grew)
	}
}

// TestFileReleaseRSS: on Linux, Release takes touched file pages out of the resident set.
func TestFileReleaseRSS(t *testing.T) {
	if testutil.Emulated() {
		t.Skip("qemu-user answers madvise with success and does nothing")
	}
	const size = 32 << 20
	m, err := MapFile(writeTemp(t, make([]byte, size)), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	s := 0
	for i := 0; i < len(b); i += 4096 {
		s += int(b[i])
	}
	touched := procStatusKB(t, "RssFile")
	if err := m.Release(0, size); err != nil {
		t.Fatal(err)
	}
	released := procStatusKB(t, "RssFile")
	t.Logf("RssFile %d kB after touching 32 MiB, %d kB after Release (sum %d)", touched, released, s)
	if touched-released < 24<<10 {
		t.Errorf("Release took only %d kB out of RssFile, want most of 32 MiB", touched-released)
	}
}
