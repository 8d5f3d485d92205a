#!/usr/bin/env bash
# make openai-node: the npm `openai` package as a second real client of `kernelrt serve`.
# Builds kernelrt, writes a random-weight tiny model (`kernelrt synth`) with Qwen2.5's chat
# template (Hermes <tool_call> convention, so the server takes tools), serves it on a free
# 127.0.0.1 port, waits for /health, installs the pinned client (npm ci) and runs check.mjs:
# structured output, tool calls, logprobs, embeddings, streamed and not. The server is
# always stopped on exit. Needs go, node 18 or later and npm (openai 6.x, the last major
# that runs on Node 18/20: openai 7 needs Node 22, Debian 12's apt nodejs is 18).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
dim=128 # the tiny shape's hidden size: the length of its embeddings

for tool in "$GO" node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "openai-node: $tool is not installed" >&2; exit 1; }
done

major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "openai-node: node $(node --version) is too old: the openai package needs 18 or later" >&2
  exit 1
fi

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    # SIGTERM drains for at most -drain-timeout; after that, stop waiting.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$GO" build -o "$tmp/kernelrt" ./cmd/kernelrt
"$tmp/kernelrt" synth -shape tiny -seed 1 -out "$tmp/base.gguf" >/dev/null
"$GO" run ./tools/openai-node/retemplate -in "$tmp/base.gguf" -template chat/testdata/templates/qwen2.5.jinja -out "$tmp/tools.gguf"

(cd tools/openai-node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# Port 0: the server picks a free port and logs its address.
"$tmp/kernelrt" serve -model "$tmp/tools.gguf" -addr 127.0.0.1:0 -parallel 2 -drain-timeout 2s >"$tmp/serve.log" 2>&1 &
pid=$!
url=
for _ in $(seq 100); do # 10 s
  url=$(sed -n 's|^kernelrt serve: listening on \(http://127\.0\.0\.1:[0-9]*\).*|\1|p' "$tmp/serve.log" | head -n 1)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "openai-node: the server did not start:" >&2
  cat "$tmp/serve.log" >&2
  exit 1
fi
# /health answers 503 until the model is loaded: poll it, 30 s at most, each try 2 s at
# most, and stop early if the server exited.
if ! node -e '
  const url = process.argv[1] + "/health", pid = Number(process.argv[2]), end = Date.now() + 30000;
  (async () => {
    for (;;) {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
        if (r.status === 200) process.exit(0);
      } catch {}
      try { process.kill(pid, 0); } catch { process.exit(1); } // the server is gone
      if (Date.now() > end) process.exit(1);
      await new Promise((ok) => setTimeout(ok, 100));
    }
  })();' "$url" "$pid"; then
  echo "openai-node: $url/health did not answer 200 within 30 s, or the server exited:" >&2
  cat "$tmp/serve.log" >&2
  exit 1
fi

if ! KERNELRT_URL=$url KERNELRT_EMBED_DIM=$dim node tools/openai-node/check.mjs; then
  echo "openai-node: server log:" >&2
  tail -n 20 "$tmp/serve.log" >&2
  exit 1
fi
