package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
)

// ---- chat ----

// cmdChat is an interactive multi-turn chat: each line read is a user message, the reply is
// streamed as it is generated, the history is kept (and its KV cache reused, so a turn
// prefills only the new messages). Ctrl-C stops the reply being written; at the prompt it
// says how to leave. Ctrl-D (end of input) exits. /reset forgets the history.
func cmdChat(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "-model FILE [-n N] [sampling flags] [-system TEXT] [-threads N] [-kv f16|f32|q8_0] [-ctx N]", stderr)
	g := addGenFlags(fs)
	n := fs.Int("n", 512, "most tokens per reply")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 0 {
		return usagef("-n must be >= 0, got %d", *n)
	}
	if err := g.check(); err != nil {
		return err
	}
	so, _ := g.sampling()
	gen, _, err := g.open(stderr)
	if err != nil {
		return err
	}
	defer gen.Close()

	// Ctrl-C cancels the reply in progress; while waiting for input it only reminds.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	var mu sync.Mutex
	onInterrupt := func() {}
	setInterrupt := func(f func()) { mu.Lock(); onInterrupt = f; mu.Unlock() }
	go func() {
		for range sig {
			mu.Lock()
			f := onInterrupt
			mu.Unlock()
			f()
		}
	}()

	var history []chat.Message
	if *g.system != "" {
		history = append(history, chat.Message{Role: "system", Content: *g.system})
	}
	fmt.Fprintln(stderr, "type a message and Enter; Ctrl-C stops a reply, Ctrl-D exits, /reset forgets the conversation")
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for {
		fmt.Fprint(stdout, "> ")
		setInterrupt(func() { fmt.Fprint(stdout, "\n(Ctrl-D exits)\n> ") })
		if !in.Scan() {
			fmt.Fprintln(stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/reset":
			history = history[:0]
			if *g.system != "" {
				history = append(history, chat.Message{Role: "system", Content: *g.system})
			}
			if err := gen.Reset(); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "(conversation reset)")
			continue
		}
		history = append(history, chat.Message{Role: "user", Content: line})
		ctx, stop := context.WithCancel(context.Background())
		setInterrupt(stop)
		var reply strings.Builder
		for piece, err := range gen.Chat(ctx, history, generate.Options{MaxTokens: *n, Stop: g.stop, Sampling: so}) {
			if err != nil {
				if errors.Is(err, context.Canceled) {
					break
				}
				stop()
				return err
			}
			reply.WriteString(piece)
			fmt.Fprint(stdout, piece)
		}
		stop()
		fmt.Fprintln(stdout)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "(stopped)")
		}
		history = append(history, chat.Message{Role: "assistant", Content: reply.String()})
		so.Seed++ // a new draw per turn, reproducible from the first seed
	}
}
