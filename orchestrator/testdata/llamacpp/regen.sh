#!/bin/sh
# Regenerates the llama.cpp compatibility fixtures of TestLlamaCppFixtures: tiny synthetic
# models quantized by llama.cpp's own quantizer, and the logits llama.cpp computes on them.
# It needs a llama.cpp build (not part of kernelrt; make test never runs this):
#
#   LLAMA=/path/to/llama.cpp LLAMALOGITS=/path/to/llamalogits sh orchestrator/testdata/llamacpp/regen.sh
#
# LLAMA is a source tree built with cmake (build/bin/llama-quantize); LLAMALOGITS is
# tools/llamacmp/llamalogits built against it (tools/llamacmp/README.md). The fixtures were
# made with llama.cpp c392e509.
set -eu
: "${LLAMA:?set LLAMA to a llama.cpp build tree}" "${LLAMALOGITS:?set LLAMALOGITS to the llamalogits binary}"
cd "$(dirname "$0")/../../.."
out=orchestrator/testdata/llamacpp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./cmd/kernelrt synth -shape tiny256 -recipe f16 -out "$tmp/qwen2.gguf"
go run ./cmd/kernelrt synth -shape tiny256-llama -recipe f16 -untied -out "$tmp/llama.gguf"
q() { "$LLAMA/build/bin/llama-quantize" "$tmp/$1.gguf" "$out/$2" "$3" 1 >/dev/null 2>&1; }
q qwen2 tiny256-qwen2-q4_k_m.gguf Q4_K_M  # Q4_K; Q6_K attn_v, ffn_down and the tied embedding
q qwen2 tiny256-qwen2-q4_0.gguf Q4_0      # Q4_0; Q6_K tied embedding
q llama tiny256-llama-untied-q5_k_m.gguf Q5_K_M  # Q5_K (also token_embd); Q6_K attn_v, ffn_down, output
commit=$(cat "$LLAMA/COMMIT" 2>/dev/null || git -C "$LLAMA" rev-parse HEAD)
go run ./tools/llamacmp -llama "$LLAMALOGITS" -commit "$commit" -p 6 -n 5 -threads 1 -fixture "$out" "$out"/*.gguf
