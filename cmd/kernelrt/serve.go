package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/serve"
)

// serveFlags are serve's settings.
type serveFlags struct {
	model, addr, kv, name string
	parallel, ctx, queue  int
	threads, batch, chunk int
	cacheRAM              int
	drain, bodyTimeout    time.Duration
	maxBody               int64
	mapWeights            bool
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "-model FILE [-addr 127.0.0.1:8080] [-parallel N] [-ctx N] [-queue N] [-threads N] [-kv f32|f16|q8_0] [-cache-ram MiB] [-drain-timeout 30s] [-map-weights]", stderr)
	var f serveFlags
	fs.StringVar(&f.model, "model", "", "GGUF model `FILE`")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen `address` (host:port; port 0 picks a free one)")
	fs.IntVar(&f.parallel, "parallel", 4, "sequences generated at once (KV-cache slots), like llama-server's -np")
	fs.IntVar(&f.ctx, "ctx", 0, "context of each sequence: prompt plus generated tokens (0 = the model's, at most 4096)")
	fs.IntVar(&f.queue, "queue", serve.DefaultQueueSize, "requests that may wait for a free slot; more get 429 (0 = none wait)")
	fs.IntVar(&f.threads, "threads", 0, "worker threads including the caller (0 = one per usable core)")
	fs.StringVar(&f.kv, "kv", "f32", "KV cache type: f32, f16 (half the memory) or q8_0 (about half of f16)")
	fs.IntVar(&f.batch, "batch", 128, "most tokens one forward step takes (at least -parallel)")
	fs.IntVar(&f.chunk, "prefill-chunk", serve.DefaultPrefillChunk, "most prompt tokens one step takes, so running streams keep a bounded inter-token latency")
	fs.IntVar(&f.cacheRAM, "cache-ram", 512, "MiB of RAM for the prefix cache: copies of slots' KV caches that outlive the slot's next request, so a prompt sharing a long prefix (a system prompt, an earlier turn) is not prefilled again (0 = off), like llama-server's --cache-ram")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long queued and running requests may take to finish before they are cancelled (keep it under the pod's terminationGracePeriodSeconds)")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "the same as -drain-timeout")
	fs.Int64Var(&f.maxBody, "max-body", serve.DefaultMaxBodyBytes, "largest request body in bytes (larger: 413)")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", time.Minute, "most time a client may take to send a request body; a slower one is cut off (0 = no limit)")
	fs.StringVar(&f.name, "name", "", "model name in responses and /v1/models (default: the file's base name)")
	fs.BoolVar(&f.mapWeights, "map-weights", false, "use the weights in place from the file mapping (less memory) instead of copying them into huge-page memory (faster decode)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case f.parallel < 1 || f.parallel > orchestrator.MaxBatchTokens:
		return usagef("-parallel must be 1 to %d, got %d", orchestrator.MaxBatchTokens, f.parallel)
	case f.ctx < 0 || f.ctx > orchestrator.MaxContext:
		return usagef("-ctx must be 0 to %d, got %d", orchestrator.MaxContext, f.ctx)
	case f.batch < 1 || f.batch > orchestrator.MaxBatchTokens:
		return usagef("-batch must be 1 to %d, got %d", orchestrator.MaxBatchTokens, f.batch)
	case f.chunk < 1:
		return usagef("-prefill-chunk must be at least 1, got %d", f.chunk)
	case f.drain < 0:
		return usagef("-drain-timeout must be >= 0, got %v", f.drain)
	case f.bodyTimeout < 0:
		return usagef("-body-timeout must be >= 0, got %v", f.bodyTimeout)
	case f.maxBody < 1:
		return usagef("-max-body must be positive, got %d", f.maxBody)
	case f.cacheRAM < 0 || f.cacheRAM > 1<<20:
		return usagef("-cache-ram must be 0 to %d MiB, got %d", 1<<20, f.cacheRAM)
	case f.queue < 0:
		return usagef("-queue must be >= 0 (0: no waiting), got %d", f.queue)
	}
	kvt, err := orchestrator.ParseKVType(f.kv)
	if err != nil {
		return usagef("-kv %q: want f32, f16 or q8_0", f.kv)
	}
	if err := checkThreads(f.threads); err != nil {
		return err
	}
	if err := checkModelFile(f.model); err != nil {
		return err
	}
	queue := f.queue
	if queue == 0 {
		queue = -1 // 0 on the command line means no waiting, not the library's default
	}
	// Listen first, so probes get 503 while the model loads, not a refused connection.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	var pending serve.Pending
	// IdleTimeout: a keep-alive connection with no request is closed after it, not held forever.
	srv := &http.Server{Handler: bodyDeadline(&pending, f.bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "kernelrt serve: listening on http://%s (OpenAI API under /v1; /health, /metrics); /health answers 503 until the model is loaded\n", ln.Addr())
	t0 := time.Now()
	// Prefault: every page of the arena (the copied weights, activations and each slot's
	// KV cache) is touched now, so "loaded" means no first request pays the page faults.
	e, err := serve.OpenEngine(f.model, serve.OpenOptions{
		Model: generate.OpenOptions{Runtime: kernelrt.Options{Threads: f.threads},
			Load: orchestrator.LoadOptions{MaxCtx: f.ctx, KV: kvt, Slots: f.parallel, MaxBatch: max(f.batch, f.parallel),
				File: arena.FileOptions{WillNeed: true}, MapWeights: f.mapWeights,
				Build: orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}}},
		Engine: serve.EngineOptions{Name: f.name, PrefillChunk: f.chunk, QueueSize: queue, PrefixCacheBytes: f.cacheRAM << 20},
	})
	if err != nil {
		srv.Close()
		return err
	}
	defer e.Close()
	h := serve.New(e, serve.Options{MaxBodyBytes: f.maxBody})
	pending.Ready(h)
	fmt.Fprintf(stderr, "kernelrt serve: %s (%s) loaded in %v: %d sequences of %d tokens, %s KV cache, %d MiB prefix cache; ready\n",
		f.model, e.Name(), time.Since(t0).Round(time.Millisecond), f.parallel, e.MaxCtx(), kvt, f.cacheRAM)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal kills the process the default way
	fmt.Fprintf(stderr, "kernelrt serve: draining (at most %v): no new requests, running ones finish\n", f.drain)
	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	// The listener closes at once; the handlers, and the engine's queued and running
	// generations behind them, get until the deadline.
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(dctx) }()
	drainErr := h.Shutdown(dctx)
	if drainErr != nil {
		st := e.Stats()
		e.Close() // ends the remaining generations: their handlers write an error and return
		srv.Close()
		<-httpDone
		return fmt.Errorf("drain deadline (%v) passed: %d running and %d queued requests were cancelled", f.drain, st.Running, st.Waiting)
	}
	if err := <-httpDone; err != nil {
		srv.Close()
		return fmt.Errorf("closing connections: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	st := e.Stats()
	fmt.Fprintf(stderr, "kernelrt serve: drained; %d requests served (%d cancelled by clients), %d tokens generated\n",
		st.Completed, st.Cancelled, st.GeneratedTokens)
	return nil
}

// bodyDeadline bounds the time a client takes to send a request body (a slow-loris body
// would otherwise hold a connection and a handler forever). It is set when the handler
// starts, after the headers (ReadHeaderTimeout bounds those), and cleared at the body's end,
// so it never reaches into a streamed answer.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body ends. After a failed
// read it stays: net/http discards an unread body (up to 256 KiB) before answering, and
// that must not wait on the slow client either.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
