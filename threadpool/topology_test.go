package threadpool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0":            {0},
		"0-3":          {0, 1, 2, 3},
		"0-1,4,6-7\n":  {0, 1, 4, 6, 7},
		"3,1,2":        {1, 2, 3},
		"":             nil,
		" 8-9 , 2 \n ": {2, 8, 9},
	} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-", "1,,2"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, got)
		}
	}
	if got := formatCPUList([]int{0, 1, 2, 5, 7, 8}); got != "[0-2,5,7-8]" {
		t.Errorf("formatCPUList = %s", got)
	}
}

// fakeSys builds a sysfs/procfs tree: siblings maps each CPU to its thread_siblings_list.
func fakeSys(siblings map[int]string, extra map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for c, s := range siblings {
		fsys[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c)] = &fstest.MapFile{Data: []byte(s + "\n")}
	}
	for name, data := range extra {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestChooseCores(t *testing.T) {
	// 4 cores x 2 SMT threads, Linux numbering: cpu i and i+4 are siblings.
	smt8 := map[int]string{}
	for c := range 8 {
		smt8[c] = fmt.Sprintf("%d,%d", c%4, c%4+4)
	}
	v1 := func(quota, period string) map[string]string {
		return map[string]string{
			"proc/self/cgroup":                                "3:cpuset:/\n2:cpu,cpuacct:/job\n0::/\n",
			"proc/self/mountinfo":                             "32 31 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us":  quota,
			"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": period,
		}
	}
	v2 := map[string]string{
		"proc/self/cgroup":                     "0::/user.slice/app\n",
		"proc/self/mountinfo":                  "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
		"sys/fs/cgroup/user.slice/app/cpu.max": "max 100000\n",
		"sys/fs/cgroup/user.slice/cpu.max":     "250000 100000\n", // a parent caps it at 2.5
	}
	hybrid := map[string]string{
		"sys/devices/cpu_atom/cpus": "4-7\n",
		"sys/devices/cpu_core/cpus": "0-3\n",
	}
	noScan := func() (map[int]bool, error) { return nil, nil }
	for _, tc := range []struct {
		name    string
		fsys    fstest.MapFS
		allowed []int
		err     error
		scan    func() (map[int]bool, error)
		want    []int
		reason  string
	}{
		{"plain 2 cores", fakeSys(map[int]string{0: "0", 1: "1"}, nil), seq(2), nil, noScan, []int{0, 1}, "no SMT siblings"},
		{"SMT siblings left out", fakeSys(smt8, nil), seq(8), nil, noScan, []int{0, 1, 2, 3}, "left out SMT siblings [4-7]"},
		{"affinity subset keeps a lone sibling", fakeSys(smt8, nil), []int{1, 5, 6}, nil, noScan, []int{1, 6}, "left out SMT siblings [5]"},
		{"no sysfs: each CPU a core", fstest.MapFS{}, seq(3), nil, noScan, []int{0, 1, 2}, "without sysfs topology"},
		{"affinity unreadable", fstest.MapFS{}, nil, errors.New("EPERM"), noScan, []int{0}, "assuming CPU 0 only"},
		{"hybrid via cpu_atom", fakeSys(nil, hybrid), seq(8), nil, noScan, []int{0, 1, 2, 3}, "left out efficiency cores [4-7] (sysfs cpu_atom)"},
		{"only E-cores allowed", fakeSys(nil, hybrid), []int{5, 6}, nil, noScan, []int{5, 6}, "only efficiency cores allowed"},
		{"big.LITTLE via cpu_capacity", fakeSys(nil, map[string]string{
			"sys/devices/system/cpu/cpu0/cpu_capacity": "446",
			"sys/devices/system/cpu/cpu1/cpu_capacity": "446",
			"sys/devices/system/cpu/cpu2/cpu_capacity": "1024",
			"sys/devices/system/cpu/cpu3/cpu_capacity": "1024",
		}), seq(4), nil, noScan, []int{2, 3}, "(sysfs cpu_capacity)"},
		{"hybrid via cpuid scan", fakeSys(nil, nil), seq(4), nil, func() (map[int]bool, error) {
			return map[int]bool{3: true}, nil
		}, []int{0, 1, 2}, "(cpuid topology scan)"},
		{"hybrid scan failing", fakeSys(nil, nil), seq(2), nil, func() (map[int]bool, error) {
			return nil, errors.New("no affinity")
		}, []int{0, 1}, "core types unknown"},
		{"cgroup v1 quota 1.5 -> 1", fakeSys(smt8, v1("150000", "100000")), seq(8), nil, noScan, []int{0}, "cgroup CPU quota 1.50 cores"},
		{"cgroup v1 unlimited", fakeSys(smt8, v1("-1", "100000")), seq(8), nil, noScan, []int{0, 1, 2, 3}, "no cgroup CPU quota"},
		{"cgroup v1 quota above cores", fakeSys(smt8, v1("800000", "100000")), seq(8), nil, noScan, []int{0, 1, 2, 3}, "not limiting"},
		{"cgroup v1 tiny quota keeps one", fakeSys(smt8, v1("10000", "100000")), seq(8), nil, noScan, []int{0}, "keeping 1"},
		{"cgroup v2 parent limit", fakeSys(smt8, v2), seq(8), nil, noScan, []int{0, 1}, "2.50 cores (/sys/fs/cgroup/user.slice)"},
		// Docker with cgroup v2 and a private cgroup namespace (the default since Docker 20.10):
		// the container's own cgroup is the mount's root.
		{"cgroup v2 container root", fakeSys(smt8, map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      "1021 1012 0:31 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate\n",
			"sys/fs/cgroup/cpu.max":    "300000 100000\n",
			"sys/fs/cgroup/cpu.weight": "100\n",
		}), seq(8), nil, noScan, []int{0, 1, 2}, "3.00 cores (/sys/fs/cgroup)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := chooseCores(topoInput{fsys: tc.fsys, allowed: tc.allowed, allowedErr: tc.err, scanEfficiency: tc.scan})
			if !slices.Equal(got, tc.want) || !strings.Contains(reason, tc.reason) {
				t.Errorf("got %v, %q; want %v and a reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestPerfLevels: on Apple silicon (no sysfs, no affinity) the macOS performance levels
// decide, so the default pool leaves the efficiency cores out.
func TestPerfLevels(t *testing.T) {
	for _, tc := range []struct {
		ncpu, levels, perf0 int
		want                []int
		reason              string
	}{
		{12, 2, 8, seq(8), "left out efficiency cores [8-11] (sysctl hw.perflevel0)"},
		{8, 2, 4, seq(4), "left out efficiency cores [4-7]"},
		{4, 1, 4, seq(4), "no efficiency cores"},
		{10, 2, 11, seq(10), "core types unknown"},
	} {
		got, reason := chooseCores(topoInput{fsys: fstest.MapFS{}, allowed: seq(tc.ncpu),
			scanEfficiency: func() (map[int]bool, error) { return perfLevelEfficiency(tc.ncpu, tc.levels, tc.perf0) },
			scanSource:     "sysctl hw.perflevel0"})
		if !slices.Equal(got, tc.want) || !strings.Contains(reason, tc.reason) {
			t.Errorf("%+v: got %v, %q; want %v and %q", tc, got, reason, tc.want, tc.reason)
		}
	}
}

// TestCgroupNamespaced covers a v1 mount whose root is the process's own cgroup, as in a
// container: the path in /proc/self/cgroup lies outside the mount, so the mount point is
// the cgroup.
func TestCgroupNamespaced(t *testing.T) {
	fsys := fakeSys(nil, map[string]string{
		"proc/self/cgroup":                    "5:cpu:/docker/abc\n",
		"proc/self/mountinfo":                 "32 31 0:28 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n",
		"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  "200000\n",
		"sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
	})
	limit, where, err := cgroupCPULimit(fsys)
	if err != nil || limit != 2 || where != "/sys/fs/cgroup/cpu" {
		t.Errorf("cgroupCPULimit = %v, %q, %v; want 2 from /sys/fs/cgroup/cpu", limit, where, err)
	}
	if got := unescapeMount(`/a\040b`); got != "/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}

// TestUsableCoresHere checks the real machine's answer for consistency with the process
// affinity mask.
func TestUsableCoresHere(t *testing.T) {
	cores, reason := UsableCores()
	allowed, err := processAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if len(cores) == 0 || len(cores) > len(allowed) {
		t.Fatalf("UsableCores() = %v for affinity %v", cores, allowed)
	}
	for _, c := range cores {
		if !slices.Contains(allowed, c) {
			t.Errorf("core %d is not in the affinity mask %v", c, allowed)
		}
	}
	t.Log(reason)
}
