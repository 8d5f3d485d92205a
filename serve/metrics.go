package serve

import (
	"github.com/prometheus/client_golang/prometheus"
)

// engineMetrics are an Engine's Prometheus collectors, in a registry of its own (never the
// global one: two engines in one process, or a program with its own metrics, must not
// collide).
type engineMetrics struct {
	reg                       *prometheus.Registry
	prompt, reused, generated prometheus.Counter
	embedded                  prometheus.Counter
	pcHits, pcRestored        prometheus.Counter
	batchSeqs, batchToks      prometheus.Histogram
	ttft, itl                 prometheus.Histogram
}

// latencyBuckets span 1 ms to about 33 s: an inter-token gap on a small model is
// milliseconds, a first token behind a long queue seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

func newEngineMetrics(e *Engine) *engineMetrics {
	m := &engineMetrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kernelrt", Name: name, Help: help})
	}
	m.prompt = counter("prompt_tokens_total", "Prompt tokens of requests that got a slot.")
	m.reused = counter("prompt_tokens_reused_total", "Prompt tokens found in a slot's cache (a common prefix with an earlier request), not computed again.")
	m.generated = counter("generated_tokens_total", "Tokens sampled.")
	m.embedded = counter("embedding_tokens_total", "Tokens run for embeddings (/v1/embeddings).")
	m.pcHits = counter("prefix_cache_hits_total", "Prompts that started from a copy in the prefix cache.")
	m.pcRestored = counter("prefix_cache_restored_tokens_total", "Prompt positions restored from the prefix cache, not computed again (also in prompt_tokens_reused_total).")
	m.batchSeqs = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kernelrt", Name: "batch_sequences",
		Help: "Sequences in one forward step.", Buckets: prometheus.ExponentialBuckets(1, 2, 8)})
	m.batchToks = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kernelrt", Name: "batch_tokens",
		Help: "Tokens in one forward step (one per decoding sequence plus prompt chunks).", Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kernelrt", Name: "time_to_first_token_seconds",
		Help: "From a request's submission to its first sampled token.", Buckets: latencyBuckets})
	m.itl = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kernelrt", Name: "inter_token_seconds",
		Help: "Between consecutive sampled tokens of one request.", Buckets: latencyBuckets})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "kernelrt", Name: name, Help: help}, f)
	}
	ended := func(outcome string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "kernelrt", Name: "requests_ended_total",
			Help: "Generations ended, by outcome.", ConstLabels: prometheus.Labels{"outcome": outcome}}, f)
	}
	m.reg.MustRegister(m.prompt, m.reused, m.generated, m.embedded, m.pcHits, m.pcRestored, m.batchSeqs, m.batchToks, m.ttft, m.itl,
		gauge("queue_depth", "Requests waiting for a slot.", func() float64 { return float64(e.Stats().Waiting) }),
		gauge("running_sequences", "Requests in a slot (prefilling, decoding or embedding).", func() float64 { return float64(e.running.Load()) }),
		gauge("slots", "Sequences the KV cache holds.", func() float64 { return float64(len(e.slots)) }),
		gauge("prefix_cache_bytes", "Memory of the prefix cache's copies of KV caches.", func() float64 { return float64(e.pcBytes.Load()) }),
		gauge("prefix_cache_entries", "Copies the prefix cache holds.", func() float64 { return float64(e.pcEntries.Load()) }),
		gauge("kv_cache_usage_ratio", "Fraction (0-1) of the KV cache's positions, all slots together, that running requests hold.", e.KVCacheUsage),
		ended("completed", func() float64 { return float64(e.completed.Load()) }),
		ended("cancelled", func() float64 { return float64(e.cancelled.Load()) }),
		ended("failed", func() float64 { return float64(e.failed.Load()) }),
		ended("rejected", func() float64 { return float64(e.rejected.Load()) }),
	)
	// The names vLLM exports, which Kubernetes' Gateway API Inference Extension reads by
	// default (its model-server protocol: queued requests, running requests, KV-cache
	// utilization 0-1; vLLM renamed the last from gpu_ to kv_cache_usage_perc), with vLLM's
	// model_name label.
	vllm := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllm:" + name, Help: help + " (kernelrt's, under vLLM's name)",
			ConstLabels: prometheus.Labels{"model_name": e.opts.Name}}, f)
	}
	m.reg.MustRegister(
		vllm("num_requests_waiting", "Requests waiting for a slot.", func() float64 { return float64(e.Stats().Waiting) }),
		vllm("num_requests_running", "Requests in a slot.", func() float64 { return float64(e.running.Load()) }),
		vllm("kv_cache_usage_perc", "KV-cache usage, 1 = full.", e.KVCacheUsage),
		vllm("gpu_cache_usage_perc", "KV-cache usage, 1 = full; vLLM's older name.", e.KVCacheUsage),
	)
	return m
}

// Metrics is the engine's Prometheus registry: tokens, batch sizes, queue depth, running
// sequences, time to first token and inter-token latency. A program can gather it with its
// own, or serve it (the Server's /metrics does).
func (e *Engine) Metrics() prometheus.Gatherer { return e.metrics.reg }
