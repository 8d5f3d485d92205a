package kernelrt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// record is one dispatch as the report ring keeps it. Worker stamps are nanoseconds since
// the runtime's epoch; wstart/wend are sized once to the thread count.
type record struct {
	op      Op
	mode    Mode
	shape   Shape
	active  int
	units   int
	granule int
	start   int64
	end     int64
	wstart  []int64
	wend    []int64
	set     *kern.Set // the kernels that ran
}

// recorder is a fixed-size ring of records, allocated once: recording a dispatch allocates
// nothing.
type recorder struct {
	ring []record
	n    int // records written in total
}

func newRecorder(capacity, threads int) *recorder {
	r := &recorder{ring: make([]record, capacity)}
	stamps := make([]int64, 2*capacity*threads)
	for i := range r.ring {
		r.ring[i].wstart = stamps[(2*i)*threads : (2*i+1)*threads : (2*i+1)*threads]
		r.ring[i].wend = stamps[(2*i+1)*threads : (2*i+2)*threads : (2*i+2)*threads]
	}
	return r
}

func (r *recorder) next() *record {
	rec := &r.ring[r.n%len(r.ring)]
	r.n++
	for i := range rec.wstart {
		rec.wstart[i], rec.wend[i] = 0, 0
	}
	return rec
}

// records returns the kept records, oldest first.
func (r *recorder) records() []*record {
	k := min(r.n, len(r.ring))
	out := make([]*record, 0, k)
	for i := r.n - k; i < r.n; i++ {
		out = append(out, &r.ring[i%len(r.ring)])
	}
	return out
}

// WorkerRange is one worker's share of a call in the report.
type WorkerRange struct {
	Worker   int
	Lo, Hi   int // split units [Lo, Hi)
	Scratch  int // private scratch bytes used (0 if the op needs none)
	ArenaOff int // arena offset of the worker's scratch (-1 if none)
}

// OpReport summarises one op (and mode) over the records in the ring.
type OpReport struct {
	Op         string
	Mode       string
	Kernels    string // backend/variant of the last call
	Calls      int
	Serial     int // calls that ran on the caller only
	Active     int // workers of the last call
	Split      string
	Shape      Shape
	Workers    []WorkerRange // the last call's split
	TotalNs    int64
	MeanNs     float64
	DispatchNs float64 // mean time from dispatch start to a helper worker starting (pool calls)
}

// Report summarises the recorded dispatches per op and mode, in order of total time.
// It returns nil when reporting is off (Options.Trace == 0).
func (rt *Runtime) Report() []OpReport {
	if rt.rec == nil {
		return nil
	}
	rt.dispatch.Lock() // traced calls write the ring under it
	defer rt.dispatch.Unlock()
	type key struct {
		op   Op
		mode Mode
	}
	agg := map[key]*OpReport{}
	lat := map[key][2]float64{}
	for _, r := range rt.rec.records() {
		k := key{r.op, r.mode}
		o := agg[k]
		if o == nil {
			o = &OpReport{Op: r.op.String(), Mode: r.mode.String(), Split: rt.table[r.op].Split.String()}
			agg[k] = o
		}
		o.Kernels = r.set.Name()
		o.Calls++
		if r.active <= 1 {
			o.Serial++
		}
		o.TotalNs += r.end - r.start
		o.Active, o.Shape = r.active, r.shape
		o.Workers = o.Workers[:0]
		row := &rt.table[r.op]
		for w := 0; w < r.active; w++ {
			lo, hi := share(r.units, r.granule, w, r.active)
			wr := WorkerRange{Worker: w, Lo: lo, Hi: hi, ArenaOff: -1}
			if row.ScratchBytes != nil {
				wr.Scratch = row.ScratchBytes(r.shape)
				wr.ArenaOff = rt.scrOff[w]
			}
			o.Workers = append(o.Workers, wr)
			if w > 0 && r.wstart[w] > 0 {
				l := lat[k]
				lat[k] = [2]float64{l[0] + float64(r.wstart[w]-r.start), l[1] + 1}
			}
		}
	}
	out := make([]OpReport, 0, len(agg))
	for k, o := range agg {
		o.MeanNs = float64(o.TotalNs) / float64(o.Calls)
		if l := lat[k]; l[1] > 0 {
			o.DispatchNs = l[0] / l[1]
		}
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TotalNs > out[j].TotalNs })
	return out
}

// WriteReport prints the report as a table: per op, calls, serial fallbacks or pool, active
// workers, each worker's range, scratch bytes and arena offsets, dispatch latency and time.
func (rt *Runtime) WriteReport(w io.Writer) error {
	rep := rt.Report()
	if rep == nil {
		_, err := fmt.Fprintln(w, "kernelrt: reporting is off (Options.Trace == 0)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tmode\tkernels\tcalls\tpath\tactive\tsplit\tworker ranges\tscratch B/worker\tarena offsets\tdispatch µs\tmean µs\ttotal ms")
	for _, o := range rep {
		path := "pool"
		if o.Serial == o.Calls {
			path = "serial"
		} else if o.Serial > 0 {
			path = fmt.Sprintf("pool (%d serial)", o.Serial)
		}
		var rng, offs []string
		scr := 0
		for _, wr := range o.Workers {
			rng = append(rng, fmt.Sprintf("%d:[%d,%d)", wr.Worker, wr.Lo, wr.Hi))
			if wr.ArenaOff >= 0 {
				offs = append(offs, fmt.Sprintf("%#x", wr.ArenaOff))
				scr = wr.Scratch
			}
		}
		off := "-"
		if len(offs) > 0 {
			off = strings.Join(offs, " ")
		}
		disp := "-"
		if o.DispatchNs > 0 {
			disp = fmt.Sprintf("%.2f", o.DispatchNs/1e3)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%.2f\t%.3f\n", o.Op, o.Mode, o.Kernels,
			o.Calls, path, o.Active, o.Split, strings.Join(rng, " "), scr, off, disp, o.MeanNs/1e3,
			float64(o.TotalNs)/1e6)
	}
	return tw.Flush()
}

// traceEvent is one Chrome trace-event ("X" = complete event, times in µs).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes the recorded dispatches as Chrome trace-event JSON, one track per
// worker, which Perfetto (ui.perfetto.dev) and chrome://tracing open.
func (rt *Runtime) WriteTrace(w io.Writer) error {
	if rt.rec == nil {
		return fmt.Errorf("kernelrt: reporting is off (Options.Trace == 0)")
	}
	rt.dispatch.Lock()
	defer rt.dispatch.Unlock()
	bw := bufio.NewWriter(w)
	ev := []traceEvent{}
	for t := 0; t < rt.threads; t++ {
		ev = append(ev, traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: t,
			Args: map[string]any{"name": fmt.Sprintf("worker %d", t)}})
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	for _, r := range rt.recs() {
		for wk := 0; wk < r.active; wk++ {
			s, e := r.wstart[wk], r.wend[wk]
			if s == 0 || e < s {
				continue
			}
			lo, hi := share(r.units, r.granule, wk, r.active)
			ev = append(ev, traceEvent{Name: r.op.String(), Cat: r.mode.String(), Ph: "X", Ts: us(s),
				Dur: us(e - s), Pid: 1, Tid: wk, Args: map[string]any{
					"split": rt.table[r.op].Split.String(), "lo": lo, "hi": hi, "active": r.active,
					"dispatch_us": us(s - r.start)}})
		}
	}
	enc := json.NewEncoder(bw)
	if err := enc.Encode(map[string]any{"traceEvents": ev, "displayTimeUnit": "ns"}); err != nil {
		return err
	}
	return bw.Flush()
}

func (rt *Runtime) recs() []*record { return rt.rec.records() }

// ResetReport forgets every recorded dispatch.
func (rt *Runtime) ResetReport() {
	if rt.rec != nil {
		rt.dispatch.Lock()
		rt.rec.n = 0
		rt.dispatch.Unlock()
	}
}
