#!/bin/sh
# Regenerates perplexity/testdata/ik, the fixtures of TestOracleKL: tiny synthetic qwen3,
# gemma2 and gemma3 models quantized by ik_llama.cpp's llama-quantize, and the token
# distributions its llama-perplexity computes on them (--kl-divergence-base). It needs an
# ik_llama.cpp build (not part of kernelrt; make test never runs this):
#
#   IK=/path/to/ik_llama.cpp [IK_COMMIT=8337e4cd] sh tools/ikfixtures/regen.sh [QUANT...]
#
# IK is a source tree built with cmake (build/bin/llama-quantize, build/bin/llama-perplexity).
# The default quantizations are the ones TestOracleKL checks; one added at the end of the list
# leaves the other fixtures byte-identical and adds a manifest line per architecture (Q2_K
# was added so). OUT overrides the output directory.
set -eu
: "${IK:?set IK to an ik_llama.cpp build tree}"
QUANTS=${*:-Q8_0 Q4_K_M IQ4_XS IQ4_NL Q3_K_M Q2_K}
CTX=${CTX:-32}
CHUNKS=${CHUNKS:-6}
cd "$(dirname "$0")/../.."
out=${OUT:-perplexity/testdata/ik}
tmp=${TMPDIR:-/tmp}/ikfixtures.$$
mkdir -p "$tmp" "$out"
trap 'rm -rf "$tmp"' EXIT
# Random prompts: printable bytes, one token each in the synthetic byte-level vocabulary.
awk 'BEGIN { srand(7); s = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?-()[]{}<>/@#$%&*+=_~";
	for (i = 0; i < 40000; i++) printf "%s", substr(s, int(rand() * length(s)) + 1, 1); print "" }' >"$tmp/text.txt"
go build -o "$tmp/kernelrt" ./cmd/kernelrt
for a in qwen3 gemma3 gemma2; do
	# Layers share their weights and draw their 256-value blocks from 32 (the files
	# compress); output_norm x6 makes the logits wide enough to tell a wrong kernel.
	"$tmp/kernelrt" synth -shape "tiny256-$a" -recipe f16 -codebook 32 -shared-layers -output-norm-scale 6 -out "$tmp/$a.f16.gguf"
done
# Quantization by quantization, so that one added at the end adds lines at the end of the
# manifest and leaves the other fixtures' bytes as they are.
files=
for q in $QUANTS; do
	for a in qwen3 gemma3 gemma2; do
		x=
		# ik_llama.cpp's IQ4 mixes put its own IQ5_K on token_embd and attn_v; mainline-like types instead.
		case $q in IQ4_*) x="--token-embedding-type q6_K --attn-v-type q6_K" ;; esac
		"$IK/build/bin/llama-quantize" $x "$tmp/$a.f16.gguf" "$tmp/$a-$q.gguf" "$q" >"$tmp/$a-$q.log" 2>&1
		"$IK/build/bin/llama-perplexity" -m "$tmp/$a-$q.gguf" -f "$tmp/text.txt" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" -t 2 \
			--kl-divergence-base "$tmp/$a-$q.kld" >>"$tmp/$a-$q.log" 2>&1
		files="$files $tmp/$a-$q.gguf"
	done
done
commit=${IK_COMMIT:-$(git -C "$IK" rev-parse --short HEAD 2>/dev/null || echo unknown)}
rm -f "$out"/*.gz "$out/manifest.json"
go run ./tools/ikfixtures -out "$out" -oracle "ik_llama.cpp $commit" $files
