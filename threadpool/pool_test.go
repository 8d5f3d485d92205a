package threadpool

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testThreads is the thread count of most tests: every usable core, and at least 2 so
// that workers exist to test.
func testThreads() int {
	cores, _ := UsableCores()
	return max(2, len(cores))
}

func newPool(t testing.TB, o Options) *Pool {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// slot is one thread's record, alone on its cache lines so that the test's own writes
// do not slow the pool down.
type slot struct {
	_     pad
	runs  uint64
	nth   int
	epoch uint64
	_     pad
}

// countTask records, per thread, how often it ran, with which nth and for which dispatch.
type countTask struct {
	slots []slot
	epoch uint64
}

func (t *countTask) Run(ith, nth int) {
	s := &t.slots[ith]
	s.runs++
	s.nth = nth
	s.epoch = t.epoch
}

// checkDispatch dispatches with the given active count and verifies that exactly threads
// 0..active-1 ran, once each, with nth == active.
func checkDispatch(t testing.TB, p *Pool, task *countTask, want []uint64, active int) {
	task.epoch++
	if active == p.Threads() && task.epoch%2 == 0 {
		p.Dispatch(task)
	} else {
		p.DispatchN(active, task)
	}
	for i := range task.slots {
		s := &task.slots[i]
		if i < active {
			want[i]++
			if s.runs != want[i] || s.nth != active || s.epoch != task.epoch {
				t.Fatalf("dispatch %d (active %d): thread %d ran %d times (want %d), nth %d, epoch %d",
					task.epoch, active, i, s.runs, want[i], s.nth, s.epoch)
			}
		} else if s.runs != want[i] {
			t.Fatalf("dispatch %d (active %d): inactive thread %d ran (%d runs, want %d)",
				task.epoch, active, i, s.runs, want[i])
		}
	}
}

// TestStress runs a million dispatches with random active counts (fewer under -short or
// the race detector) and checks every one.
func TestStress(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	dispatches := 1_000_000
	if testing.Short() || raceEnabled {
		dispatches = 20_000
	}
	if p.Oversubscribed() { // every dispatch is a futex round trip: keep it bounded
		dispatches = min(dispatches, 20_000)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("%d dispatches, %d threads, seed %d", dispatches, n, seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	task := &countTask{slots: make([]slot, n)}
	want := make([]uint64, n)
	for range dispatches {
		checkDispatch(t, p, task, want, 1+rng.IntN(n))
	}
	st := p.Stats()
	if st.Dispatches != uint64(dispatches) {
		t.Errorf("Stats.Dispatches = %d, want %d", st.Dispatches, dispatches)
	}
}

// TestSingleThread checks a one-thread pool: no workers, the caller runs everything.
func TestSingleThread(t *testing.T) {
	p := newPool(t, Options{Threads: 1})
	task := &countTask{slots: make([]slot, 1)}
	want := make([]uint64, 1)
	for range 100 {
		checkDispatch(t, p, task, want, 1)
	}
	p.Barrier() // one thread: returns at once, even outside a task
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSleepPath dispatches after every worker fell asleep, repeatedly.
func TestSleepPath(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: 20 * time.Microsecond})
	task := &countTask{slots: make([]slot, n)}
	want := make([]uint64, n)
	for i := range 20 {
		waitAllAsleep(t, p)
		checkDispatch(t, p, task, want, 1+i%n)
	}
	st := p.Stats()
	if st.Sleeps == 0 || st.Wakeups == 0 {
		t.Errorf("after 20 dispatches to sleeping workers: Sleeps %d, Wakeups %d; want both > 0", st.Sleeps, st.Wakeups)
	}
}

// TestInactiveStayAsleep checks that DispatchN wakes only the sleeping workers it needs,
// and that Resume wakes them all.
func TestInactiveStayAsleep(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: 20 * time.Microsecond})
	task := &countTask{slots: make([]slot, n)}
	want := make([]uint64, n)
	for active := 1; active <= n; active++ {
		waitAllAsleep(t, p)
		before := p.wakeups.Load() // wakes sent by the caller, not the caller's own
		checkDispatch(t, p, task, want, active)
		if got := p.wakeups.Load() - before; got != uint64(active-1) {
			t.Errorf("DispatchN(%d) with every worker asleep sent %d wakes, want %d", active, got, active-1)
		}
	}
	waitAllAsleep(t, p)
	p.Pause()
	before := p.wakeups.Load()
	p.Resume()
	if got := p.wakeups.Load() - before; got != uint64(n-1) {
		t.Errorf("Resume sent %d wakes to %d sleeping workers", got, n-1)
	}
}

// TestNoSpin runs with spinning disabled: every wait is a futex sleep.
func TestNoSpin(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: -1})
	if p.SpinBudget() != 0 {
		t.Fatalf("SpinBudget() = %v, want 0", p.SpinBudget())
	}
	task := &countTask{slots: make([]slot, n)}
	want := make([]uint64, n)
	for i := range 2000 {
		checkDispatch(t, p, task, want, 1+i%n)
	}
}

// TestPauseResume cycles Pause and Resume, dispatching in both states.
func TestPauseResume(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	task := &countTask{slots: make([]slot, n)}
	want := make([]uint64, n)
	for cycle := range 5 {
		p.Pause()
		waitAllAsleep(t, p) // paused workers sleep at once, not after the budget
		for i := range 10 {
			checkDispatch(t, p, task, want, 1+(cycle+i)%n)
		}
		waitAllAsleep(t, p) // and go back to sleep after each dispatch
		p.Resume()
		for i := range 100 {
			checkDispatch(t, p, task, want, 1+(cycle+i)%n)
		}
	}
}

// TestCloseWhileSleeping closes a pool whose workers all sleep, and checks that no
// goroutine is left behind and that Close is idempotent.
func TestCloseWhileSleeping(t *testing.T) {
	base := runtime.NumGoroutine()
	n := testThreads()
	p, err := New(Options{Threads: n, SpinBudget: 10 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	// Workers of earlier tests' pools may still be returning from their last defer.
	for deadline := time.Now().Add(30 * time.Second); workerGoroutines() != n-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d worker goroutines after New, want %d", workerGoroutines(), n-1)
		}
	}
	p.Dispatch(&emptyTask{})
	waitAllAsleep(t, p)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	waitGoroutines(t, base)
}

// TestNoGoroutineLeak closes pools in every state (hot, paused, after a panic) and
// checks the goroutine count returns to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, state := range []string{"hot", "paused", "after panic", "never dispatched"} {
		p, err := New(Options{Threads: testThreads()})
		if err != nil {
			t.Fatal(err)
		}
		switch state {
		case "hot":
			for range 100 {
				p.Dispatch(&emptyTask{})
			}
		case "paused":
			p.Pause()
			p.Dispatch(&emptyTask{})
		case "after panic":
			func() {
				defer func() { _ = recover() }()
				p.Dispatch(panicTask{on: 1, value: "boom"})
			}()
		}
		if err := p.Close(); err != nil {
			t.Fatalf("%s: Close: %v", state, err)
		}
	}
	waitGoroutines(t, base)
}

// workerGoroutines counts the goroutines running a pool worker, of any pool.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "threadpool.(*Pool).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitGoroutines polls until no worker goroutine is left and the goroutine count is back
// to base: a worker that has signalled its exit may take a moment to finish.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base || workerGoroutines() > 0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// phaseTask checks the barrier: in each round every active thread writes its slot, waits
// at the barrier, checks every other active thread's slot, and waits again before the
// next round overwrites them. Plain memory: the race detector checks the barrier too.
type phaseTask struct {
	p      *Pool
	rounds int
	vals   []slot
	errs   atomic.Int64
	delay  int // thread that dawdles before each arrival, -1 for none
	dawdle time.Duration
}

func (t *phaseTask) Run(ith, nth int) {
	for r := 1; r <= t.rounds; r++ {
		t.vals[ith].epoch = uint64(r)
		if ith == t.delay {
			time.Sleep(t.dawdle)
		}
		t.p.Barrier()
		for j := range nth {
			if t.vals[j].epoch != uint64(r) {
				t.errs.Add(1)
			}
		}
		t.p.Barrier()
	}
}

// TestBarrier runs the barrier at every active count, including 1, in hot and sleeping
// variants, and reuses it across dispatches without reset.
func TestBarrier(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: 20 * time.Microsecond})
	for _, delay := range []int{-1, 0, n - 1} {
		for active := 1; active <= n; active++ {
			task := &phaseTask{p: p, rounds: 50, vals: make([]slot, n), delay: delay, dawdle: 200 * time.Microsecond}
			if delay < 0 {
				task.rounds = 2000
			}
			if raceEnabled || testing.Short() {
				task.rounds = min(task.rounds, 100)
			}
			for range 3 {
				p.DispatchN(active, task)
			}
			if e := task.errs.Load(); e != 0 {
				t.Fatalf("active %d, dawdler %d: %d threads passed the barrier before all arrived", active, delay, e)
			}
		}
	}
	if st := p.Stats(); st.Sleeps == 0 {
		t.Errorf("a thread dawdling 10x the spin budget never made the others sleep at the barrier")
	}
}

// TestBarrierOutsideTask checks that a barrier call with no dispatch fails loudly.
func TestBarrierOutsideTask(t *testing.T) {
	p := newPool(t, Options{Threads: testThreads(), SpinBudget: 10 * time.Microsecond})
	p.Dispatch(&emptyTask{}) // active = Threads
	msg := mustPanic(t, p.Barrier)
	if !strings.Contains(fmt.Sprint(msg), "Barrier called outside a task") {
		t.Fatalf("Barrier outside a task panicked with %v", msg)
	}
	checkUsable(t, p)
}

// panicTask panics on thread `on` (all threads if on < 0).
type panicTask struct {
	on    int
	value any
}

func (t panicTask) Run(ith, nth int) {
	if t.on < 0 || ith == t.on {
		panicHere(t.value)
	}
}

//go:noinline
func panicHere(v any) { panic(v) }

// mustPanic returns what f panicked with, failing the test if it did not panic.
func mustPanic(t *testing.T, f func()) (v any) {
	t.Helper()
	defer func() {
		v = recover()
		if v == nil {
			t.Fatalf("did not panic")
		}
	}()
	f()
	return nil
}

// checkUsable runs a checked dispatch at every active count.
func checkUsable(t *testing.T, p *Pool) {
	t.Helper()
	task := &countTask{slots: make([]slot, p.Threads())}
	want := make([]uint64, p.Threads())
	for active := 1; active <= p.Threads(); active++ {
		checkDispatch(t, p, task, want, active)
	}
}

// TestTaskPanic panics on each thread in turn, and on all at once: the dispatch completes,
// the caller gets a *Panic with the original value and the worker's stack, and the pool
// stays usable.
func TestTaskPanic(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	sentinel := errors.New("sentinel")
	for on := -1; on < n; on++ {
		v := mustPanic(t, func() { p.Dispatch(panicTask{on: on, value: sentinel}) })
		pe, ok := v.(*Panic)
		if !ok {
			t.Fatalf("panic on %d: Dispatch panicked with %T %v, want *Panic", on, v, v)
		}
		if pe.Value != sentinel || !errors.Is(pe, sentinel) {
			t.Fatalf("panic on %d: Value %v, want the original", on, pe.Value)
		}
		if on >= 0 && pe.Worker != on {
			t.Fatalf("panic on %d: Worker = %d", on, pe.Worker)
		}
		if !strings.Contains(string(pe.Stack), "panicHere") || !strings.Contains(pe.Error(), "panicHere") {
			t.Fatalf("panic on %d: stack lacks the panicking function:\n%s", on, pe.Stack)
		}
		checkUsable(t, p)
	}
}

// barrierPanicTask panics on thread `on` before the barrier the others wait at.
type barrierPanicTask struct {
	p  *Pool
	on int
}

func (t *barrierPanicTask) Run(ith, nth int) {
	if ith == t.on {
		time.Sleep(100 * time.Microsecond) // let the others reach the barrier, even asleep
		panicHere("barrier boom")
	}
	t.p.Barrier()
	t.p.Barrier()
}

// TestPanicAtBarrier checks that a task failing before a barrier does not strand the
// others there, and that the caller sees the original panic.
func TestPanicAtBarrier(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: 20 * time.Microsecond})
	for on := range n {
		v := mustPanic(t, func() { p.Dispatch(&barrierPanicTask{p: p, on: on}) })
		pe, ok := v.(*Panic)
		if !ok || pe.Value != "barrier boom" || pe.Worker != on {
			t.Fatalf("panic on %d: got %#v", on, v)
		}
		task := &phaseTask{p: p, rounds: 10, vals: make([]slot, n), delay: -1}
		p.Dispatch(task) // the barrier works again
		if task.errs.Load() != 0 {
			t.Fatalf("barrier broken after a panic on %d", on)
		}
	}
}

// dispatchInTask dispatches on its own pool from thread `on`.
type dispatchInTask struct {
	p  *Pool
	on int
}

func (t *dispatchInTask) Run(ith, nth int) {
	if ith == t.on {
		t.p.Dispatch(&emptyTask{})
	}
}

// closeInTask closes its own pool from thread `on`.
type closeInTask struct {
	p  *Pool
	on int
}

func (t *closeInTask) Run(ith, nth int) {
	if ith == t.on {
		_ = t.p.Close()
	}
}

// TestMisuse checks that every misuse fails loudly with a message saying what happened,
// and that none deadlocks or leaves the pool broken.
func TestMisuse(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	expect := func(what string, v any, want ...string) {
		t.Helper()
		msg := fmt.Sprint(v)
		if pe, ok := v.(*Panic); ok {
			msg = fmt.Sprint(pe.Value)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: panic %q does not contain %q", what, msg, w)
			}
		}
		checkUsable(t, p)
	}
	for on := range n {
		v := mustPanic(t, func() { p.Dispatch(&dispatchInTask{p: p, on: on}) })
		expect(fmt.Sprintf("re-entrant Dispatch on thread %d", on), v, "inside a task", fmt.Sprintf("worker %d", on))
		v = mustPanic(t, func() { p.Dispatch(&closeInTask{p: p, on: on}) })
		expect(fmt.Sprintf("Close inside a task on thread %d", on), v, "Close called from inside a task")
	}
	expect("active 0", mustPanic(t, func() { p.DispatchN(0, &emptyTask{}) }), "out of range")
	expect("active > Threads", mustPanic(t, func() { p.DispatchN(n+1, &emptyTask{}) }), "out of range")
	expect("nil task", mustPanic(t, func() { p.Dispatch(nil) }), "nil Task")

	// Two goroutines at once: the first one's share blocks until the second has failed.
	second := make(chan any, 1)
	blocker := taskFunc(func(ith, nth int) {
		if ith == 0 {
			fin := make(chan struct{})
			go func() {
				defer close(fin)
				defer func() { second <- recover() }()
				p.Dispatch(&emptyTask{})
			}()
			<-fin
		}
	})
	p.Dispatch(blocker)
	expect("concurrent Dispatch", <-second, "another goroutine is dispatching")

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	msg := mustPanic(t, func() { p.Dispatch(&emptyTask{}) })
	if msg != "threadpool: Dispatch after Close" {
		t.Fatalf("Dispatch after Close panicked with %q", msg)
	}
	msg = mustPanic(t, func() { p.DispatchN(1, &emptyTask{}) })
	if msg != "threadpool: Dispatch after Close" {
		t.Fatalf("DispatchN after Close panicked with %q", msg)
	}
}

// taskFunc adapts a function to Task for tests where allocation does not matter.
type taskFunc func(ith, nth int)

func (f taskFunc) Run(ith, nth int) { f(ith, nth) }

// TestCloseDuringDispatch closes from another goroutine while a dispatch runs: Close
// waits for it, and later dispatches fail loudly.
func TestCloseDuringDispatch(t *testing.T) {
	p := newPool(t, Options{Threads: testThreads()})
	closed := make(chan error)
	var started sync.WaitGroup
	started.Add(1)
	task := taskFunc(func(ith, nth int) {
		if ith == 0 {
			started.Done()
			time.Sleep(20 * time.Millisecond) // Close is waiting meanwhile
		}
	})
	go func() {
		started.Wait()
		closed <- p.Close()
	}()
	p.Dispatch(task)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if msg := mustPanic(t, func() { p.Dispatch(&emptyTask{}) }); msg != "threadpool: Dispatch after Close" {
		t.Fatalf("got %v", msg)
	}
}

// TestGoexit checks runtime.Goexit inside tasks: on the dispatching goroutine the
// dispatch still completes and the pool stays usable; on a worker the pool becomes
// unusable, says so, and still closes cleanly.
func TestGoexit(t *testing.T) {
	base := runtime.NumGoroutine()
	n := testThreads()
	p, err := New(Options{Threads: n})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Dispatch(taskFunc(func(ith, nth int) {
			if ith == 0 {
				runtime.Goexit()
			}
		}))
	}()
	<-done
	checkUsable(t, p)

	v := mustPanic(t, func() {
		p.Dispatch(taskFunc(func(ith, nth int) {
			if ith == n-1 {
				runtime.Goexit()
			}
		}))
	})
	if pe, ok := v.(*Panic); !ok || !strings.Contains(fmt.Sprint(pe.Value), "runtime.Goexit") {
		t.Fatalf("Goexit on a worker: got %v", v)
	}
	msg := fmt.Sprint(mustPanic(t, func() { p.Dispatch(&emptyTask{}) }))
	if !strings.Contains(msg, "unusable pool") {
		t.Fatalf("Dispatch after a worker's Goexit: got %q", msg)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, base)
}

// TestOversubscription runs twice as many threads as usable cores: reported, and still
// correct, barrier included, both with the default (no spinning) and with an explicit
// spin budget, where spinners compete with the threads they wait for.
func TestOversubscription(t *testing.T) {
	cores, _ := UsableCores()
	n := 2 * len(cores)
	for _, spin := range []time.Duration{0, 50 * time.Microsecond} {
		p := newPool(t, Options{Threads: n, SpinBudget: spin})
		if !p.Oversubscribed() || !strings.Contains(p.Describe(), "OVERSUBSCRIBED") {
			t.Fatalf("Threads = %d on %d cores: Oversubscribed() = %v, Describe() = %q", n, len(cores), p.Oversubscribed(), p.Describe())
		}
		if spin == 0 && p.SpinBudget() != 0 {
			t.Errorf("oversubscribed pool spins by default: %v", p.SpinBudget())
		}
		rng := rand.New(rand.NewPCG(1, 2))
		task := &countTask{slots: make([]slot, n)}
		want := make([]uint64, n)
		for range 1000 {
			checkDispatch(t, p, task, want, 1+rng.IntN(n))
		}
		for active := 1; active <= n; active++ {
			bt := &phaseTask{p: p, rounds: 20, vals: make([]slot, n), delay: -1}
			p.DispatchN(active, bt)
			if bt.errs.Load() != 0 {
				t.Fatalf("spin %v: oversubscribed barrier, active %d: broken", spin, active)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAllocs checks that Dispatch, DispatchN and Barrier allocate nothing.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Log("race detector on: allocation counts include its bookkeeping, checking anyway")
	}
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	task := &emptyTask{}
	bt := &barrierTask{p: p, rounds: 4}
	var st Stats
	p.ReadStats(&st)
	for name, f := range map[string]func(){
		"Dispatch":        func() { p.Dispatch(task) },
		"DispatchN(1)":    func() { p.DispatchN(1, task) },
		"DispatchN(n)":    func() { p.DispatchN(n, task) },
		"Barrier":         func() { p.Dispatch(bt) },
		"ReadStats reuse": func() { p.ReadStats(&st) },
	} {
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}
}

// TestStats checks the counters' meaning.
func TestStats(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n})
	work := taskFunc(func(ith, nth int) {
		deadline := time.Now().Add(200 * time.Microsecond)
		for time.Now().Before(deadline) {
		}
	})
	for range 10 {
		p.Dispatch(work)
	}
	p.DispatchN(1, work)
	st := p.Stats()
	if st.Dispatches != 11 {
		t.Errorf("Dispatches = %d, want 11", st.Dispatches)
	}
	if len(st.Busy) != n {
		t.Fatalf("len(Busy) = %d, want %d", len(st.Busy), n)
	}
	for i, b := range st.Busy {
		// Each thread ran at least 10 tasks of >= 200 µs of wall time. Busy time counts
		// wall time too, so a preempted thread only shows more. Ticks become time at a
		// rate measured over the pool's few milliseconds of life; 2% covers its error.
		if b < 1960*time.Microsecond {
			t.Errorf("Busy[%d] = %v, want >= 1.96ms (10 tasks of 200µs)", i, b)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st2 := p.Stats(); st2.Dispatches != 11 {
		t.Errorf("after Close: Dispatches = %d, want 11", st2.Dispatches)
	}
}

// TestOptions checks option validation and defaults.
func TestOptions(t *testing.T) {
	allowed, err := processAffinity()
	if err != nil {
		allowed = []int{0}
	}
	limit := MaxOversubscription * len(allowed)
	// 12000 threads used to end the process in Go's fatal "thread exhaustion" error.
	for _, threads := range []int{-1, MaxThreads + 1, 12000, limit + 1, math.MaxInt} {
		p, err := New(Options{Threads: threads})
		if err == nil {
			_ = p.Close()
			t.Errorf("New(Threads: %d) succeeded", threads)
			continue
		}
		if !errors.Is(err, ErrThreads) || !strings.Contains(err.Error(), strconv.Itoa(threads)) {
			t.Errorf("New(Threads: %d): error %q does not wrap ErrThreads or name the count", threads, err)
		}
	}
	cores, reason := UsableCores()
	p := newPool(t, Options{})
	if p.Threads() != len(cores) {
		t.Errorf("default Threads() = %d, want %d (%s)", p.Threads(), len(cores), reason)
	}
	if got := p.Cores(); fmt.Sprint(got) != fmt.Sprint(cores) {
		t.Errorf("Cores() = %v, want %v", got, cores)
	}
	if p.Oversubscribed() && len(cores) <= runtime.GOMAXPROCS(0) {
		t.Errorf("default pool reports oversubscription: %s", p.Describe())
	}
	if !p.Oversubscribed() && p.SpinBudget() != DefaultSpinBudget {
		t.Errorf("default SpinBudget() = %v, want %v", p.SpinBudget(), DefaultSpinBudget)
	}
	t.Log(p.Describe())
	q := newPool(t, Options{Threads: 2, NoPin: true, SpinBudget: 3 * time.Microsecond})
	if q.Pinned() || !strings.Contains(q.Describe(), "not pinned") || q.SpinBudget() != 3*time.Microsecond {
		t.Errorf("NoPin pool: Pinned %v, SpinBudget %v, Describe %q", q.Pinned(), q.SpinBudget(), q.Describe())
	}
}

// TestThreadLimit checks the cap on Options.Threads against the CPUs the process may use.
func TestThreadLimit(t *testing.T) {
	for _, tc := range []struct{ cpus, want int }{
		{0, MaxOversubscription}, {1, MaxOversubscription}, {2, 2 * MaxOversubscription},
		{64, 64 * MaxOversubscription}, {MaxThreads, MaxThreads}, {math.MaxInt, MaxThreads},
	} {
		if got := threadLimit(tc.cpus); got != tc.want {
			t.Errorf("threadLimit(%d) = %d, want %d", tc.cpus, got, tc.want)
		}
	}
}
