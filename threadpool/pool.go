// Package threadpool runs short parallel jobs on a fixed set of pinned, persistent worker
// threads. An empty dispatch costs about one cache-line round trip between two cores.
//
// The goroutine that calls Dispatch is worker 0 and runs its own share inline; workers
// 1..n-1 are goroutines started by New, each locked to its OS thread and pinned to its own
// core (call PinCaller once to pin the dispatching goroutine too). Between dispatches a
// worker spins for Options.SpinBudget, then sleeps on a futex; the caller waits for the
// others the same way, and the last worker to finish wakes it.
//
// Protocol: the caller writes the task, then publishes epoch and active count in one
// 64-bit word with a sequentially consistent store; a worker that loads a new epoch runs
// its share and increments a completion counter on the same cache line, which the caller
// watches. A worker or caller about to sleep announces it in its futex word and re-checks
// the condition (a Dekker handshake with the waker), so no wake-up can be missed.
//
// Platforms: pinning and the futex are Linux's. Elsewhere the threads are locked but not
// pinned, and a sleeping thread naps (time.Sleep of 50 µs, longer where the OS timer is
// coarser) and re-checks, so wake-ups are slower than on Linux.
//
// Errors: New returns an error for bad options. Dispatch, DispatchN, Barrier and Close
// panic on misuse, which is a programming error: dispatching after Close, two goroutines
// dispatching at once, a task dispatching on (or closing) its own pool. A panic inside a
// task is different: the dispatch completes on every worker, then Dispatch panics with a
// *Panic carrying the original value and that worker's stack, and the pool stays usable.
package threadpool

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSpinBudget is how long idle workers, and a caller waiting for them, spin before
// sleeping. Decode dispatches 20-50 µs kernels back to back with at most tens of
// microseconds of Go code between them; 100 µs keeps workers hot across those gaps (a wake
// from sleep costs about 10 µs), while a pool left idle stops burning its cores after a
// tenth of a millisecond.
const DefaultSpinBudget = 100 * time.Microsecond

// MaxThreads is the hard cap on Options.Threads. Every thread of a pool is a locked OS
// thread, and Go ends the whole process (a fatal error, not a panic or an error) once it
// has more than debug.SetMaxThreads threads, 10,000 by default; 1024 covers the largest
// machines the pool is meant for (two-socket servers have up to 768 hardware threads) and
// leaves that limit room for the runtime's own threads. (The dispatch word, which packs
// the active count with the epoch, would allow 1<<16.)
const MaxThreads = 1024

// MaxOversubscription bounds Options.Threads at this many threads per CPU the process may
// run on (its affinity mask). Work is split statically, so every dispatch waits for the
// last thread to get a CPU: beyond a few threads per CPU, more only adds context switches,
// and a count far beyond it is a mistake rather than a tuning choice.
const MaxOversubscription = 4

// ErrThreads is wrapped by the error New returns for a thread count it cannot run.
var ErrThreads = errors.New("threadpool: unusable thread count")

// threadLimit is the largest Options.Threads New accepts on a process that may run on cpus
// CPUs.
func threadLimit(cpus int) int {
	if cpus > MaxThreads/MaxOversubscription {
		return MaxThreads
	}
	return MaxOversubscription * max(1, cpus)
}

// Options configures New. The zero value is the recommended configuration.
type Options struct {
	// Threads is the number of threads including the caller. 0 means one per usable
	// physical core (see UsableCores). More threads than usable cores is allowed: the pool
	// stays correct but reports itself Oversubscribed and, unless SpinBudget is set,
	// sleeps instead of spinning, since a spinner would steal the core its peer needs.
	// New refuses more than MaxOversubscription per CPU in the affinity mask, or more
	// than MaxThreads, with an error wrapping ErrThreads.
	Threads int
	// NoPin leaves the worker threads locked to their goroutines but not pinned to cores,
	// and makes PinCaller lock without pinning. Pinning is on by default because a
	// migrating worker loses its caches and can land on the core of a peer it waits for.
	NoPin bool
	// SpinBudget is how long an idle worker or a waiting caller spins before sleeping on a
	// futex. It is a duration, not an iteration count, because PAUSE takes about 14x longer
	// on some CPUs than on others. 0 means DefaultSpinBudget, or no spinning when
	// oversubscribed; a negative value means no spinning: threads sleep after a few dozen
	// PAUSEs (the clock is read only every 32 of them).
	SpinBudget time.Duration
}

// Task is one parallel job. Run is called once on each active worker with ith in
// [0, nth) and nth the number of active workers. The caller owns the value (a pointer to
// a struct keeps Dispatch allocation-free); the pool keeps a reference to it until a
// later dispatch replaces it.
type Task interface {
	Run(ith, nth int)
}

// pad keeps fields written by different threads on different cache lines. 128 bytes
// rather than 64 because the adjacent-line prefetcher fetches lines in pairs.
type pad [128]byte

// Futex word values for a sleeping worker or caller.
const (
	stateAwake    uint32 = 0
	stateSleeping uint32 = 1
)

// Values of Pool.busy: who owns the pool's dispatch slot.
const (
	busyIdle uint32 = iota
	busyDispatching
	busyClosed
	busyDead // a worker goroutine exited via runtime.Goexit in a task
)

// Layout of ctl: the epoch above epochShift, the active count below it, and quitBit to
// tell workers to exit. 44 bits of epoch never wrap in practice (and a wrap would still
// be harmless: workers only compare for inequality), so the epoch doubles as the
// dispatch counter.
const (
	epochShift = 20
	quitBit    = 1 << 19
	activeMask = quitBit - 1
)

// spinCheck is how many PAUSEs pass between clock reads in a spin loop: a clock read
// costs ~20 ns, and the budget may overshoot by this many PAUSEs.
const spinCheck = 32

// worker is one thread's slot. Worker 0 (the caller) uses only its stats and panic record.
type worker struct {
	_ pad
	// state is the worker's futex word. The worker writes it only when it falls asleep or
	// wakes, so the caller's read of it on every dispatch hits in its own cache.
	state atomic.Uint32
	_     pad
	// Written by this thread after each task, off the critical path.
	busyTicks atomic.Int64
	sleeps    atomic.Uint64
	wakeups   atomic.Uint64
	// Panic record, written by this thread before it counts itself done and read by the
	// caller after the dispatch completed.
	failed     bool
	panicVal   any
	panicStack []byte
	// Set once when the worker starts, before New returns.
	g      uintptr
	pinErr error
	_      pad
}

// Pool is a fixed set of threads that run Tasks together. Only one goroutine may
// dispatch at a time; Stats, Pause, Resume and the accessors are safe from any goroutine.
type Pool struct {
	_ pad
	// The dispatch line: the one cache line through which the caller and the workers talk.
	//
	// ctl publishes a dispatch: epoch and active count (or quitBit) in one word, so a
	// worker can never see one without the other. task, target and active are written
	// before ctl is stored (release) and read after it is loaded (acquire).
	//
	// done counts worker completions; it only grows, so the caller never writes it. It
	// shares the line with ctl on purpose, like the two ends of a ping-pong: a worker's
	// read of ctl brings the line over for writing, so its increment costs no second
	// transfer. Measured here, a publish/complete round trip costs 55 ns on one line and
	// 95 ns on two. Everything written by anyone else lives on other lines.
	ctl    atomic.Uint64
	done   atomic.Uint64
	task   Task
	target uint64 // value of done once every worker of this dispatch has finished
	active int    // active count of the current dispatch, for Barrier
	_      pad
	// callerState is the waiting caller's futex word.
	callerState atomic.Uint32
	_           pad
	barArrived  atomic.Uint32
	_           pad
	barGen      atomic.Uint32 // futex word of barrier sleepers
	barSleepers atomic.Uint32 // read by the releaser right after it bumps barGen: same line
	barSleeps   atomic.Uint64
	barWakeups  atomic.Uint64
	_           pad
	// Rarely written flags, read in spin loops.
	paused     atomic.Bool
	broken     atomic.Bool  // a task failed in this dispatch: barriers give up
	firstPanic atomic.Int32 // ith+1 of the first task that panicked
	deadWorker atomic.Int32 // ith+1 of a worker that exited through runtime.Goexit
	_          pad
	// Written by the dispatching goroutine.
	busy         atomic.Uint32
	epoch        uint64
	expect       uint64
	solo         atomic.Uint64 // dispatches with one active thread: they publish no epoch
	callerSleeps atomic.Uint64
	wakeups      atomic.Uint64
	_            pad
	// Fixed by New.
	n          int
	cores      []int
	pin        bool
	spin       int64 // ns
	oversub    string
	coreReason string
	workers    []worker
	exited     sync.WaitGroup
	closeMu    sync.Mutex
	ticks0     int64 // cputicks and nanotime at New, to convert ticks to time
	nanos0     int64
}

// New starts a pool. It returns once every worker runs on its thread (pinned unless
// Options.NoPin); a failure to pin does not fail New but shows in Pinned and Describe.
func New(o Options) (*Pool, error) {
	if o.Threads < 0 {
		return nil, fmt.Errorf("threadpool: Options.Threads = %d: want 0 (one per usable core) or more: %w", o.Threads, ErrThreads)
	}
	if o.Threads > MaxThreads {
		return nil, fmt.Errorf("threadpool: Options.Threads = %d: more than MaxThreads (%d): %w", o.Threads, MaxThreads, ErrThreads)
	}
	allowed, err := processAffinity()
	if err != nil {
		allowed = make([]int, runtime.NumCPU())
	}
	if limit := threadLimit(len(allowed)); o.Threads > limit {
		return nil, fmt.Errorf("threadpool: Options.Threads = %d: more than %d x the %d CPUs this process may run on (%d): %w",
			o.Threads, MaxOversubscription, len(allowed), limit, ErrThreads)
	}
	usable, reason := UsableCores()
	n := o.Threads
	if n == 0 {
		n = len(usable)
	}
	p := &Pool{n: n, pin: !o.NoPin, coreReason: reason, cores: make([]int, n), workers: make([]worker, n)}
	p.ticks0, p.nanos0 = clockPair()
	for i := range p.cores {
		p.cores[i] = usable[i%len(usable)]
	}
	var over []string
	if n > len(usable) {
		over = append(over, fmt.Sprintf("%d threads on %d usable cores", n, len(usable)))
	}
	if g := runtime.GOMAXPROCS(0); n > g {
		over = append(over, fmt.Sprintf("%d threads but GOMAXPROCS=%d", n, g))
	}
	p.oversub = strings.Join(over, ", ")
	switch {
	case o.SpinBudget < 0:
		p.spin = 0
	case o.SpinBudget > 0:
		p.spin = int64(o.SpinBudget)
	case p.oversub != "":
		p.spin = 0
	default:
		p.spin = int64(DefaultSpinBudget)
	}
	ready := make(chan struct{}, n)
	p.exited.Add(n - 1)
	for i := 1; i < n; i++ {
		go p.work(i, ready)
	}
	for i := 1; i < n; i++ {
		<-ready
	}
	return p, nil
}

// Threads returns the number of threads, the caller included.
func (p *Pool) Threads() int { return p.n }

// Cores returns the logical CPU each worker is pinned to (index 0: the caller, for
// PinCaller). With more threads than usable cores, cores repeat.
func (p *Pool) Cores() []int { return append([]int(nil), p.cores...) }

// Oversubscribed reports whether the pool has more threads than usable cores or than
// GOMAXPROCS, so that its threads must share CPUs.
func (p *Pool) Oversubscribed() bool { return p.oversub != "" }

// Pinned reports whether every worker thread was pinned to its core.
func (p *Pool) Pinned() bool {
	if !p.pin {
		return false
	}
	for i := 1; i < p.n; i++ {
		if p.workers[i].pinErr != nil {
			return false
		}
	}
	return true
}

// SpinBudget returns the spin budget in effect.
func (p *Pool) SpinBudget() time.Duration { return time.Duration(p.spin) }

// Describe returns a one-paragraph account of the pool's configuration for reports:
// threads, cores, pinning, spin budget, oversubscription and how the cores were chosen.
func (p *Pool) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d threads on cores %v, ", p.n, p.cores)
	switch {
	case !p.pin:
		b.WriteString("locked, not pinned")
	case p.Pinned():
		b.WriteString("pinned")
	default:
		b.WriteString("pinning failed:")
		for i := 1; i < p.n; i++ {
			if err := p.workers[i].pinErr; err != nil {
				fmt.Fprintf(&b, " worker %d: %v;", i, err)
			}
		}
	}
	fmt.Fprintf(&b, ", spin budget %v", time.Duration(p.spin))
	if p.oversub != "" {
		fmt.Fprintf(&b, ", OVERSUBSCRIBED (%s)", p.oversub)
	}
	fmt.Fprintf(&b, "; %s", p.coreReason)
	return b.String()
}

// PinCaller locks the calling goroutine to its OS thread and pins that thread to worker
// 0's core, so the caller's share runs beside, not on top of, the other workers. Call it
// once on the goroutine that will dispatch (for instance before a decode loop) and call
// unpin when done; unpin restores the old affinity and unlocks. With Options.NoPin it only
// locks. err reports that pinning was not possible; the thread is locked and unpin must
// still be called.
func (p *Pool) PinCaller() (unpin func(), err error) {
	runtime.LockOSThread()
	if !p.pin {
		return runtime.UnlockOSThread, nil
	}
	old, err := threadAffinity()
	if err != nil {
		return runtime.UnlockOSThread, fmt.Errorf("threadpool: PinCaller: %w", err)
	}
	if err := setThreadAffinity(p.cores[:1]); err != nil {
		return runtime.UnlockOSThread, fmt.Errorf("threadpool: PinCaller: %w", err)
	}
	return func() {
		_ = setThreadAffinity(old) // best effort: the mask was readable a moment ago
		runtime.UnlockOSThread()
	}, nil
}

// Dispatch runs t on every thread and returns when all have finished. See DispatchN.
func (p *Pool) Dispatch(t Task) { p.DispatchN(p.n, t) }

// DispatchN runs t.Run(ith, active) on threads 0..active-1, the caller being thread 0,
// and returns when all have finished; workers >= active are not woken. It allocates
// nothing. It panics with a *Panic if a task panicked (after the dispatch completed), and
// with a message on misuse: active out of range, a nil task, after Close, while another
// goroutine dispatches, or from inside a task of this pool.
func (p *Pool) DispatchN(active int, t Task) {
	if uint(active-1) >= uint(p.n) {
		panic(fmt.Sprintf("threadpool: DispatchN(active=%d) out of range 1..%d", active, p.n))
	}
	if t == nil {
		panic("threadpool: Dispatch of a nil Task")
	}
	if !p.busy.CompareAndSwap(busyIdle, busyDispatching) {
		p.misuse("Dispatch")
	}
	if p.active != active {
		p.active = active // written only on change: it shares the line workers spin on
	}
	if active > 1 {
		p.task = t
		p.expect += uint64(active - 1)
		p.target = p.expect
		p.epoch++
		// Swap, not Store: the store must be ordered before wakeWorkers' loads of the
		// workers' states (see wakeWorkers).
		p.ctl.Swap(p.epoch<<epochShift | uint64(active))
		p.wakeWorkers(1, active)
	} else {
		p.solo.Add(1)
	}
	t0 := cputicks()
	p.runCaller(active, t)
	p.workers[0].busyTicks.Add(cputicks() - t0)
	if active > 1 {
		p.waitDone(p.target)
	}
	if p.broken.Load() {
		p.failDispatch()
	}
	releaseBusy(&p.busy)
}

// wakeWorkers wakes the sleeping workers among [from, to). It pairs with sleepWorker as
// a Dekker handshake: the caller stores ctl then loads state, the worker stores state then
// loads ctl; sequentially consistent atomics guarantee one of them sees the other. Both
// stores are Swaps (read-modify-writes): Go's atomics are sequentially consistent on every
// CPU, but qemu-user's arm64 emulation on x86 turns a plain STLR followed by an LDAR into
// a store and a load the host may reorder, and the CI's emulated tests lost wakeups (a
// worker and the caller asleep for good) until both sides used an atomic exchange.
func (p *Pool) wakeWorkers(from, to int) {
	for i := from; i < to; i++ {
		w := &p.workers[i]
		if w.state.Load() == stateSleeping && w.state.CompareAndSwap(stateSleeping, stateAwake) {
			futexWake(&w.state, 1)
			p.wakeups.Add(1)
		}
	}
}

// waitDone waits until done reaches target: spinning for the budget, then sleeping until
// the last worker wakes the caller.
func (p *Pool) waitDone(target uint64) {
	if p.done.Load() == target {
		return
	}
	var from int64
	for i := 1; ; i++ {
		cpuPause()
		if p.done.Load() == target {
			return
		}
		if i%spinCheck == 0 {
			// The clock is first read after spinCheck pauses: a hot dispatch never pays for it.
			if from == 0 {
				from = nanotime()
			} else if nanotime()-from > p.spin {
				break
			}
		}
	}
	for {
		// Swap: ordered before the load of done, as wakeWorkers explains.
		p.callerState.Swap(stateSleeping)
		if p.done.Load() == target {
			break
		}
		p.callerSleeps.Add(1)
		futexWait(&p.callerState, stateSleeping)
	}
	p.callerState.Store(stateAwake)
}

// complete counts one worker's share of the current dispatch as done and, if it was the
// last and the caller sleeps, wakes the caller.
func (p *Pool) complete(w *worker, target uint64) {
	if p.done.Add(1) == target {
		p.wakeCaller(w)
	}
}

// wakeCaller wakes the caller if it sleeps waiting for the dispatch that just completed.
func (p *Pool) wakeCaller(w *worker) {
	if p.callerState.Load() == stateSleeping && p.callerState.CompareAndSwap(stateSleeping, stateAwake) {
		futexWake(&p.callerState, 1)
		w.wakeups.Add(1)
	}
}

// loopState is a worker's position, kept across the restart that follows a panic.
type loopState struct {
	seen      uint64 // last epoch handled
	target    uint64 // target of the dispatch being run, for a failure's completion
	spinStart int64  // when spinning began (0: not yet read), for the spin budget
	// tick is the cputicks of the spin iteration that found the current dispatch: the
	// start of the task for busy time. Reading the clock while spinning costs nothing,
	// where reading it between finding a dispatch and completing it would delay both.
	tick int64
}

// work is the body of worker ith.
func (p *Pool) work(ith int, ready chan<- struct{}) {
	defer p.exited.Done()
	runtime.LockOSThread()
	w := &p.workers[ith]
	w.g = curg()
	if p.pin {
		orig, err := threadAffinity()
		if err == nil {
			err = setThreadAffinity(p.cores[ith : ith+1])
		}
		w.pinErr = err
		defer func() {
			// Hand the thread back to the scheduler only with its old mask; if that
			// cannot be restored, stay locked so that the runtime ends the thread.
			if err == nil && setThreadAffinity(orig) == nil {
				runtime.UnlockOSThread()
			}
		}()
	} else {
		defer runtime.UnlockOSThread()
	}
	ready <- struct{}{}
	st := loopState{spinStart: nanotime()} // epoch 0 is New's: nothing to run
	for p.workLoop(w, ith, &st) {
	}
}

// workLoop runs dispatches until Close (false) or until a task fails (true, after the
// failure is recorded and the share counted). The recover lives here, once per loop
// rather than once per task, to keep a deferred call off the worker's critical path.
func (p *Pool) workLoop(w *worker, ith int, st *loopState) (again bool) {
	inTask := false
	defer func() {
		if inTask {
			v := recover()
			p.taskFailed(ith, v)
			p.complete(w, st.target)
			again = v != nil // nil: runtime.Goexit, which goes on ending this goroutine
		}
	}()
	for {
		c, found := p.spinWorker(st)
		if !found {
			if p.sleepWorker(w, st.seen) {
				st.spinStart = 0 // woken on purpose (Resume): be hot for what follows
			}
			continue
		}
		st.seen = c >> epochShift
		if c&quitBit != 0 {
			return false
		}
		if active := int(c & activeMask); ith < active {
			t0 := st.tick
			task, target := p.task, p.target
			st.target = target
			inTask = true
			task.Run(ith, active)
			inTask = false
			// Nothing of the dispatch may be read after this: the caller may already be
			// publishing the next one.
			if p.done.Add(1) == target {
				p.wakeCaller(w)
			}
			w.busyTicks.Add(cputicks() - t0)
			st.spinStart = 0
		}
	}
}

// spinWorker spins until the epoch moves (the new ctl, true), or until the spin budget is
// spent or the pool is paused (false). The budget runs from the end of the last task or
// wake, not from a dispatch this worker was not part of.
func (p *Pool) spinWorker(st *loopState) (uint64, bool) {
	for i := 1; ; i++ {
		st.tick = cputicks()
		if c := p.ctl.Load(); c>>epochShift != st.seen {
			return c, true
		}
		cpuPause()
		if i%spinCheck == 0 {
			if p.paused.Load() {
				return 0, false
			}
			now := nanotime()
			if st.spinStart == 0 {
				st.spinStart = now
			} else if now-st.spinStart > p.spin {
				return 0, false
			}
		}
	}
}

// sleepWorker sleeps until the epoch moves or someone wakes the worker; it reports the
// latter (a wake without new work comes from Resume).
func (p *Pool) sleepWorker(w *worker, seen uint64) (woken bool) {
	w.state.Swap(stateSleeping) // ordered before the load of ctl: see wakeWorkers

	for {
		if p.ctl.Load()>>epochShift != seen {
			break
		}
		if w.state.Load() != stateSleeping {
			woken = true
			break
		}
		w.sleeps.Add(1)
		futexWait(&w.state, stateSleeping)
	}
	w.state.Store(stateAwake)
	return woken
}

// runCaller runs the caller's share and turns a panic into a record, so that the other
// threads still finish the dispatch before the caller reports it.
func (p *Pool) runCaller(nth int, t Task) {
	ok := false
	defer func() {
		if !ok && p.taskFailed(0, recover()) {
			p.finishAfterGoexit()
		}
	}()
	t.Run(0, nth)
	ok = true
}

// taskFailed records a failed share and releases the barrier. v is the recovered panic
// value, or nil when the task called runtime.Goexit, which cannot be stopped: the
// goroutine is ending. It reports the latter.
func (p *Pool) taskFailed(ith int, v any) (goexit bool) {
	goexit = v == nil
	if goexit {
		v = fmt.Sprintf("threadpool: task called runtime.Goexit on worker %d", ith)
		if ith > 0 {
			p.deadWorker.CompareAndSwap(0, int32(ith+1))
		}
	}
	w := &p.workers[ith]
	w.failed, w.panicVal, w.panicStack = true, v, debug.Stack()
	if v != errBarrierBroken {
		p.firstPanic.CompareAndSwap(0, int32(ith+1))
	}
	p.broken.Store(true)
	p.breakBarrier()
	return goexit
}

// finishAfterGoexit runs when the dispatching goroutine's own task called runtime.Goexit:
// the goroutine is ending, but the pool must not be left half-way through a dispatch.
// Nobody is left to report to, so the failure record is dropped.
func (p *Pool) finishAfterGoexit() {
	if p.active > 1 {
		p.waitDone(p.target)
	}
	dead := p.deadWorker.Load() != 0
	p.clearFailures()
	if dead {
		p.busy.Store(busyDead)
	} else {
		p.busy.Store(busyIdle)
	}
}

// failDispatch runs on the caller once every thread finished a dispatch in which a task
// failed: it resets the failure state, frees the pool and panics with the first failure.
func (p *Pool) failDispatch() {
	k := int(p.firstPanic.Load()) - 1
	if k < 0 { // cannot happen: a broken barrier always follows a real failure
		k = 0
		for i := range p.workers {
			if p.workers[i].failed {
				k = i
				break
			}
		}
	}
	w := &p.workers[k]
	e := &Panic{Worker: k, Value: w.panicVal, Stack: w.panicStack}
	dead := p.deadWorker.Load() != 0
	p.clearFailures()
	if dead {
		p.busy.Store(busyDead)
	} else {
		p.busy.Store(busyIdle)
	}
	panic(e)
}

// clearFailures resets the per-dispatch failure state; every thread has finished.
func (p *Pool) clearFailures() {
	for i := range p.workers {
		w := &p.workers[i]
		w.failed, w.panicVal, w.panicStack = false, nil, nil
	}
	p.firstPanic.Store(0)
	p.barArrived.Store(0) // a failed dispatch may leave a barrier half-filled
	p.broken.Store(false)
}

// misuse panics with what went wrong when the dispatch slot could not be taken.
func (p *Pool) misuse(op string) {
	switch p.busy.Load() {
	case busyClosed:
		panic("threadpool: " + op + " after Close")
	case busyDead:
		panic(fmt.Sprintf("threadpool: %s on an unusable pool: worker %d exited through runtime.Goexit inside a task",
			op, p.deadWorker.Load()-1))
	}
	if role := p.role(); role != "" {
		panic("threadpool: " + op + " called from inside a task on this pool (" + role +
			"): a task must not dispatch on or close its own pool, that would deadlock")
	}
	panic("threadpool: " + op + " called while another goroutine is dispatching on this pool: only one goroutine may dispatch at a time")
}

// role names the calling goroutine's part in a running dispatch, or "" if it has none.
// It runs only on the error path, so it may afford a stack walk.
func (p *Pool) role() string {
	if g := curg(); g != 0 {
		for i := 1; i < p.n; i++ {
			if p.workers[i].g == g {
				return fmt.Sprintf("worker %d", i)
			}
		}
	}
	if inTaskFrame() {
		// Not a worker of this pool but running a task: the dispatcher's own share (or,
		// with several pools, a task of another pool dispatching here).
		return "worker 0, the dispatching goroutine"
	}
	return ""
}

// inTaskFrame reports whether the calling goroutine is running a pool task.
func inTaskFrame() bool {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "threadpool.(*Pool).runCaller") ||
			strings.HasSuffix(f.Function, "threadpool.(*Pool).workLoop") {
			return true
		}
		if !more {
			return false
		}
	}
}

// Panic is the value Dispatch panics with after a task panicked. By then every thread
// has finished the dispatch and the pool is ready for the next one.
type Panic struct {
	Worker int    // ith of the first task that panicked (0 = the caller's share)
	Value  any    // the original panic value
	Stack  []byte // the stack of that worker at the panic
}

// Error reports the original value and the worker's stack.
func (e *Panic) Error() string {
	return fmt.Sprintf("threadpool: task panicked on worker %d: %v\n\nworker %d stack:\n%s", e.Worker, e.Value, e.Worker, e.Stack)
}

// Unwrap returns the original value if it is an error.
func (e *Panic) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errBarrierBroken is what Barrier panics with once another task of the dispatch has
// failed: waiting would never end, and the caller reports the original failure instead.
var errBarrierBroken = barrierError("threadpool: Barrier abandoned because another task of this dispatch failed")

type barrierError string

func (e barrierError) Error() string { return string(e) }

// Barrier blocks until every active thread of the current dispatch has called it. It is
// called from inside a task, by all active threads the same number of times; it is
// reusable without reset and returns at once when the dispatch has one active thread.
// Threads spin for the spin budget, then sleep. If a task of the dispatch failed, Barrier
// panics so that waiting threads unwind; Dispatch then reports the original failure.
func (p *Pool) Barrier() {
	n := p.active
	if n <= 1 {
		return
	}
	if p.broken.Load() {
		panic(errBarrierBroken)
	}
	// Read the generation before arriving: once the last thread arrives it moves on.
	g := p.barGen.Load()
	if p.barArrived.Add(1) == uint32(n) {
		p.barArrived.Store(0) // before barGen moves, so nobody arrives early at the next one
		p.barGen.Add(1)
		if p.barSleepers.Load() != 0 {
			futexWake(&p.barGen, math.MaxInt32)
			p.barWakeups.Add(1)
		}
		return
	}
	if !p.barrierSpin(g) {
		p.barrierSleep(g)
	}
	if p.broken.Load() {
		panic(errBarrierBroken)
	}
}

// breakBarrier releases every barrier waiter of a failed dispatch; moving barGen is what
// makes a sleeper's futex wait return or not start.
func (p *Pool) breakBarrier() {
	p.barGen.Add(1)
	if p.barSleepers.Load() != 0 {
		futexWake(&p.barGen, math.MaxInt32)
		p.barWakeups.Add(1)
	}
}

func (p *Pool) barrierSpin(g uint32) bool {
	from := nanotime()
	for i := 1; ; i++ {
		cpuPause()
		if p.barGen.Load() != g {
			return true
		}
		if i%spinCheck == 0 && nanotime()-from > p.spin {
			return false
		}
	}
}

func (p *Pool) barrierSleep(g uint32) {
	if p.busy.Load() != busyDispatching {
		p.barArrived.Add(^uint32(0))
		panic("threadpool: Barrier called outside a task")
	}
	for {
		p.barSleepers.Add(1)
		if p.barGen.Load() != g {
			p.barSleepers.Add(^uint32(0))
			return
		}
		p.barSleeps.Add(1)
		futexWait(&p.barGen, g)
		p.barSleepers.Add(^uint32(0))
		if p.barGen.Load() != g {
			return
		}
	}
}

// Pause makes idle workers sleep now instead of spinning out their budget, and sleep
// right after every dispatch until Resume. Dispatch still works while paused, paying a
// futex wake per worker. Pause returns at once; workers notice within a few microseconds.
func (p *Pool) Pause() { p.paused.Store(true) }

// Resume ends a Pause and wakes every worker, which then spins for the spin budget: call
// it shortly before a burst of dispatches to have the workers hot.
func (p *Pool) Resume() {
	p.paused.Store(false)
	p.wakeWorkers(1, p.n)
}

// Close stops and joins every worker. It is idempotent; a Close during a dispatch by
// another goroutine waits for that dispatch to end. Close from inside a task panics.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	for {
		switch s := p.busy.Load(); s {
		case busyClosed:
			return nil
		case busyIdle, busyDead:
			if p.busy.CompareAndSwap(s, busyClosed) {
				p.epoch++
				p.ctl.Swap(p.epoch<<epochShift | quitBit)
				p.wakeWorkers(1, p.n)
				p.exited.Wait()
				return nil
			}
		default:
			if role := p.role(); role != "" {
				panic("threadpool: Close called from inside a task on this pool (" + role + "): that would deadlock")
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}
