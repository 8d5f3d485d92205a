// Package serve serves many users from one model: an Engine batches their generations
// (continuous batching over the slots of a multi-sequence KV cache, with prompt prefix
// reuse from free slots and from a prefix cache of their copies within a RAM budget,
// EngineOptions.PrefixCacheBytes), and a Server puts an OpenAI-compatible HTTP API in front of it that any net/http
// program can mount.
//
//	e, err := serve.OpenEngine("model.gguf", serve.OpenOptions{Model: generate.OpenOptions{
//		Load: orchestrator.LoadOptions{Slots: 8}}})
//	...
//	s := serve.New(e, serve.Options{})
//	http.ListenAndServe("127.0.0.1:8080", s)
//
// Routes: POST /v1/completions and POST /v1/chat/completions (OpenAI's wire format, with
// "stream": true as server-sent events ending in "data: [DONE]"), POST /v1/embeddings
// (float or base64; the final hidden states after the output norm, pooled as the file's
// pooling_type says, last token for a decoder LM, L2-normalised), GET /v1/models,
// GET /health and GET /metrics (Prometheus text). Any "model" name is accepted and answered
// by the one loaded model, whose name the responses carry, as llama.cpp's server does:
// clients written for other servers send names of their own.
//
// /metrics carries, beside kernelrt's own, the gauges Kubernetes' Gateway API Inference
// Extension reads from a model server (queued and running requests, KV-cache usage 0-1),
// also under the vLLM names its endpoint picker scrapes by default
// (vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc and the
// older vllm:gpu_cache_usage_perc). /health answers 503 while draining (Server.Shutdown)
// and, behind a Pending handler, while the model loads.
//
// logprobs (completions: an integer, 0-20 alternatives; chat: logprobs with top_logprobs
// 0-20) report each generated token's log-probability under the model's raw logits (before
// bias, penalties and temperature, as llama.cpp's server does by default) in OpenAI's
// formats, streamed and not.
//
// response_format ({"type": "json_object"} and {"type": "json_schema", "json_schema":
// {"schema": ...}}) and llama.cpp's "grammar" field (GBNF), in both endpoints, constrain
// decoding with package grammar: every sampled token keeps the text a prefix of a valid
// document, so the output parses and validates even from a random-weight model.
//
// tools and tool_choice (auto, none, required, a named function) in chat: the tools are
// shown to the model by the file's own Jinja template (as llama.cpp's --jinja does), and
// the reply is parsed back into tool_calls in the template's convention (Qwen/Hermes
// <tool_call> JSON, Llama 3.x JSON), streamed and not; with required or a named function,
// decoding is constrained by package grammar to valid calls of the listed functions.
package serve
