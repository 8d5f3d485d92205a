package threadpool

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"
	"github.com/klauspost/cpuid/v2/topology"
)

// UsableCores returns the logical CPUs a pool runs on by default, one per usable physical
// core, and a human-readable account of how they were chosen (for reports).
//
// It starts from the process affinity mask, keeps one logical CPU per physical core (SMT
// siblings share a core's execution units, so a second compute thread there only adds
// contention), drops efficiency cores on hybrid CPUs when performance cores remain (a
// static split would make every dispatch wait for the slowest core), and finally cuts the
// list to the cgroup CPU quota, rounded down: spinning workers burn quota, and a throttled
// cgroup stalls every thread for the rest of the period.
func UsableCores() (cores []int, reason string) {
	allowed, err := processAffinity()
	return chooseCores(topoInput{
		fsys:           os.DirFS("/"),
		allowed:        allowed,
		allowedErr:     err,
		scanEfficiency: platformEfficiency,
		scanSource:     platformEfficiencySource,
	})
}

// topoInput is what chooseCores needs from the system; tests substitute every part.
type topoInput struct {
	fsys       fs.FS // rooted at "/"
	allowed    []int // the process affinity mask
	allowedErr error
	// scanEfficiency returns the logical CPUs that are efficiency cores, when sysfs has no
	// answer; nil, nil means "not a hybrid CPU".
	scanEfficiency func() (map[int]bool, error)
	scanSource     string // names scanEfficiency in the reason; "" is the cpuid scan
}

// chooseCores applies affinity, SMT, hybrid and quota rules in that order.
func chooseCores(in topoInput) ([]int, string) {
	var notes []string
	cpus := slices.Clone(in.allowed)
	slices.Sort(cpus)
	cpus = slices.Compact(cpus)
	if in.allowedErr != nil || len(cpus) == 0 {
		// Without a mask assume CPU 0 only rather than guess a count that may oversubscribe.
		notes = append(notes, fmt.Sprintf("affinity mask unreadable (%v): assuming CPU 0 only", in.allowedErr))
		cpus = []int{0}
	} else {
		notes = append(notes, fmt.Sprintf("affinity mask %s (%d logical CPUs)", formatCPUList(cpus), len(cpus)))
	}

	cpus, note := dropSMTSiblings(in.fsys, cpus)
	notes = append(notes, note)

	cpus, note = dropEfficiencyCores(in.fsys, cpus, in.scanEfficiency, cmp.Or(in.scanSource, "cpuid topology scan"))
	notes = append(notes, note)

	limit, where, err := cgroupCPULimit(in.fsys)
	switch {
	case err != nil:
		notes = append(notes, fmt.Sprintf("cgroup CPU quota unreadable (%v): ignored", err))
	case limit <= 0:
		notes = append(notes, "no cgroup CPU quota")
	default:
		n := max(1, int(math.Floor(limit+1e-9)))
		if n < len(cpus) {
			cpus = cpus[:n]
			notes = append(notes, fmt.Sprintf("cgroup CPU quota %.2f cores (%s): keeping %d", limit, where, n))
		} else {
			notes = append(notes, fmt.Sprintf("cgroup CPU quota %.2f cores (%s): not limiting", limit, where))
		}
	}
	return cpus, fmt.Sprintf("%d usable cores %s: %s", len(cpus), formatCPUList(cpus), strings.Join(notes, "; "))
}

// dropSMTSiblings keeps the lowest-numbered allowed logical CPU of every physical core.
func dropSMTSiblings(fsys fs.FS, cpus []int) ([]int, string) {
	seen := map[string]bool{}
	var kept, dropped []int
	unknown := 0
	for _, c := range cpus {
		key := ""
		for _, name := range []string{"thread_siblings_list", "core_cpus_list"} {
			b, err := fs.ReadFile(fsys, fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/%s", c, name))
			if err == nil {
				if list, err := parseCPUList(string(b)); err == nil && len(list) > 0 {
					key = formatCPUList(list)
					break
				}
			}
		}
		if key == "" {
			unknown++
			key = "cpu" + strconv.Itoa(c) // no topology: count it as its own core
		}
		if seen[key] {
			dropped = append(dropped, c)
			continue
		}
		seen[key] = true
		kept = append(kept, c)
	}
	note := "no SMT siblings"
	if len(dropped) > 0 {
		note = fmt.Sprintf("left out SMT siblings %s", formatCPUList(dropped))
	}
	if unknown > 0 {
		note += fmt.Sprintf(" (%d CPUs without sysfs topology, each counted as a core)", unknown)
	}
	return kept, note
}

// dropEfficiencyCores removes efficiency cores when at least one performance core remains.
// Sources, first that answers: the Intel hybrid PMU lists in sysfs (cpu_atom/cpu_core),
// per-CPU cpu_capacity (arm big.LITTLE and newer x86 kernels), then a cpuid scan.
func dropEfficiencyCores(fsys fs.FS, cpus []int, scan func() (map[int]bool, error), scanSource string) ([]int, string) {
	eff, source := map[int]bool{}, ""
	if b, err := fs.ReadFile(fsys, "sys/devices/cpu_atom/cpus"); err == nil {
		if list, err := parseCPUList(string(b)); err == nil {
			for _, c := range list {
				eff[c] = true
			}
			source = "sysfs cpu_atom"
		}
	}
	if source == "" {
		caps := map[int]int{}
		best := 0
		for _, c := range cpus {
			b, err := fs.ReadFile(fsys, fmt.Sprintf("sys/devices/system/cpu/cpu%d/cpu_capacity", c))
			if err != nil {
				break
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				break
			}
			caps[c] = v
			best = max(best, v)
		}
		if len(caps) == len(cpus) && len(cpus) > 0 {
			source = "sysfs cpu_capacity"
			for c, v := range caps {
				if v < best {
					eff[c] = true
				}
			}
		}
	}
	if source == "" && scan != nil {
		m, err := scan()
		switch {
		case err != nil:
			return cpus, fmt.Sprintf("hybrid CPU but core types unknown (%v): kept all", err)
		case m != nil:
			eff, source = m, scanSource
		}
	}
	var kept, dropped []int
	for _, c := range cpus {
		if eff[c] {
			dropped = append(dropped, c)
		} else {
			kept = append(kept, c)
		}
	}
	switch {
	case len(dropped) == 0:
		return cpus, "no efficiency cores"
	case len(kept) == 0:
		return cpus, fmt.Sprintf("only efficiency cores allowed (%s): kept them", source)
	}
	return kept, fmt.Sprintf("left out efficiency cores %s (%s)", formatCPUList(dropped), source)
}

// perfLevelEfficiency marks efficiency cores from the per-level core counts macOS reports
// (hw.nperflevels, hw.perflevel0.physicalcpu: level 0 is the fastest): there is no CPU
// numbering to go by and no pinning, so only the count matters, and CPUs perf0 and up of
// the ncpu are called the efficiency ones. One level means not hybrid (nil).
func perfLevelEfficiency(ncpu, levels, perf0 int) (map[int]bool, error) {
	if levels <= 1 {
		return nil, nil
	}
	if perf0 < 1 || perf0 > ncpu {
		return nil, fmt.Errorf("hw.perflevel0.physicalcpu = %d of %d CPUs", perf0, ncpu)
	}
	eff := map[int]bool{}
	for c := perf0; c < ncpu; c++ {
		eff[c] = true
	}
	return eff, nil
}

// cpuidEfficiency asks cpuid for the core types; it pins the calling thread to each CPU in
// turn, so it only runs on parts that declare themselves hybrid.
func cpuidEfficiency() (map[int]bool, error) {
	if !cpuid.CPU.Supports(cpuid.HYBRID_CPU) {
		return nil, nil
	}
	sys, err := cpuid.ScanTopology()
	if err != nil {
		return nil, err
	}
	eff := map[int]bool{}
	for _, c := range sys.Cores() {
		if c.Type == topology.Efficiency || c.Type == topology.LPEfficiency {
			for _, t := range c.Threads {
				eff[t.ID] = true
			}
		}
	}
	return eff, nil
}

// cgroupCPULimit returns the CPU bandwidth limit in cores (quota / period), the smallest
// along the cgroup's ancestry in either hierarchy, or 0 when there is none.
func cgroupCPULimit(fsys fs.FS) (limit float64, where string, err error) {
	cg, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, "", nil // not Linux, or no procfs: nothing to honour
		}
		return 0, "", err
	}
	mi, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, "", nil
		}
		return 0, "", err
	}
	mounts := parseMountinfo(string(mi))
	best := 0.0
	consider := func(l float64, w string) {
		if l > 0 && (best == 0 || l < best) {
			best, where = l, w
		}
	}
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" { // cgroup v2
			for _, m := range mounts {
				if m.fstype == "cgroup2" {
					l, w := walkCgroup(fsys, m, parts[2], readCPUMax)
					consider(l, w)
				}
			}
			continue
		}
		if !slices.Contains(strings.Split(parts[1], ","), "cpu") { // cgroup v1, cpu controller
			continue
		}
		for _, m := range mounts {
			if m.fstype == "cgroup" && slices.Contains(strings.Split(m.superOpts, ","), "cpu") {
				l, w := walkCgroup(fsys, m, parts[2], readCFSQuota)
				consider(l, w)
			}
		}
	}
	return best, where, nil
}

type mount struct {
	root, point, fstype, superOpts string
}

// parseMountinfo reads /proc/self/mountinfo: "id parent dev root point opts [optional...] - fstype source superopts".
func parseMountinfo(s string) []mount {
	var out []mount
	for _, line := range strings.Split(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		out = append(out, mount{root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: g[0], superOpts: g[2]})
	}
	return out
}

// unescapeMount undoes the octal escapes (\040 for a space) that mountinfo uses.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// walkCgroup reads the limit in the process's cgroup directory and every ancestor up to
// the mount point; a parent's limit caps its children.
func walkCgroup(fsys fs.FS, m mount, cgPath string, read func(fs.FS, string) float64) (float64, string) {
	rel := cgPath
	if m.root != "/" {
		r, ok := strings.CutPrefix(cgPath, m.root)
		if !ok {
			r = "/" // cgroup namespace or bind mount: the mount point is our cgroup
		}
		rel = r
	}
	top := path.Clean(m.point)
	dir := path.Join(top, rel)
	best, where := 0.0, ""
	for {
		if l := read(fsys, fsPath(dir)); l > 0 && (best == 0 || l < best) {
			best, where = l, dir
		}
		if dir == top || dir == "/" || !strings.HasPrefix(dir, top) {
			break
		}
		dir = path.Dir(dir)
	}
	return best, where
}

// readCPUMax parses cgroup v2 cpu.max: "max 100000" or "50000 100000".
func readCPUMax(fsys fs.FS, dir string) float64 {
	b, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}

// readCFSQuota parses cgroup v1 cpu.cfs_quota_us (-1 = unlimited) and cpu.cfs_period_us.
func readCFSQuota(fsys fs.FS, dir string) float64 {
	qb, err1 := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_quota_us"))
	pb, err2 := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0
	}
	q, err1 := strconv.ParseFloat(strings.TrimSpace(string(qb)), 64)
	p, err2 := strconv.ParseFloat(strings.TrimSpace(string(pb)), 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}

// fsPath turns an absolute path into an fs.FS path rooted at "/".
func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}

// parseCPUList parses the kernel's CPU list format: "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var out []int
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// formatCPUList prints a sorted CPU list in the kernel's compact form, e.g. "[0-3,8]".
func formatCPUList(cpus []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}
