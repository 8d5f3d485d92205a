// check.mjs: the npm `openai` package as a second real client of `kernelrt serve` (the Go
// tests use the official Go client). run.sh starts the server on a random-weight model with
// a Hermes <tool_call> template and runs this script; it can also be pointed at any server:
//
//   KERNELRT_URL=http://127.0.0.1:8080 KERNELRT_EMBED_DIM=128 node check.mjs
//
// Every request has a timeout; the first failed check exits non-zero with what was sent and
// what came back; on success one line says what passed.
import OpenAI from "openai";
import { VERSION } from "openai/version";

const baseURL = process.env.KERNELRT_URL;
const embedDim = Number(process.env.KERNELRT_EMBED_DIM);
const timeoutMs = Number(process.env.KERNELRT_TIMEOUT_MS || 60000);
if (!baseURL || !/^https?:\/\//.test(baseURL)) {
  fail(`KERNELRT_URL must be the server's http:// address, got ${JSON.stringify(baseURL)}`);
}
if (!Number.isInteger(embedDim) || embedDim <= 0) {
  fail(`KERNELRT_EMBED_DIM must be the model's hidden size (a positive integer), got ${JSON.stringify(process.env.KERNELRT_EMBED_DIM)}`);
}
if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
  fail(`KERNELRT_TIMEOUT_MS must be a positive integer, got ${JSON.stringify(process.env.KERNELRT_TIMEOUT_MS)}`);
}

// A watchdog over the whole run, beside each request's own timeout: no hang outlives it.
const watchdog = setTimeout(() => fail(`the checks took longer than ${(4 * timeoutMs) / 1000}s`), 4 * timeoutMs);
watchdog.unref();

// maxRetries 0: a failure is reported, not retried away. The timeout bounds each request,
// streams included (the SDK aborts the fetch).
const client = new OpenAI({ baseURL: baseURL.replace(/\/+$/, "") + "/v1", apiKey: "unused", maxRetries: 0, timeout: timeoutMs });

function fail(msg) {
  console.error(`openai-node: FAIL: ${msg}`);
  process.exit(1);
}

function check(cond, what, detail) {
  if (!cond) fail(`${what}${detail === undefined ? "" : `\n  got: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`}`);
}

const passed = [];

// run runs one named case, whose function returns a few words on what it saw; an exception
// (an API error, a timeout) fails the run with the server's answer.
async function run(name, fn) {
  let detail;
  try {
    detail = await fn();
  } catch (e) {
    const body = e && e.error !== undefined ? `\n  server said: ${e.status} ${JSON.stringify(e.error)}` : "";
    fail(`${name}: ${e && e.stack ? e.stack : e}${body}`);
  }
  passed.push(detail ? `${name} (${detail})` : name);
}

// validate checks value against a JSON schema using only the keywords below; a schema
// with any other keyword is refused, so a check never passes by ignoring a constraint.
const known = new Set(["type", "properties", "required", "additionalProperties", "enum", "minLength", "maxLength",
  "minimum", "maximum", "items", "minItems", "maxItems", "description"]);
function validate(schema, value, path = "$") {
  for (const k of Object.keys(schema)) {
    if (!known.has(k)) throw new Error(`validate: schema keyword ${k} at ${path} is not implemented`);
  }
  const errs = [];
  const t = schema.type;
  const typeOk = {
    object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
    array: (v) => Array.isArray(v),
    string: (v) => typeof v === "string",
    integer: (v) => Number.isInteger(v),
    number: (v) => typeof v === "number" && Number.isFinite(v),
    boolean: (v) => typeof v === "boolean",
  };
  if (t !== undefined) {
    if (!typeOk[t]) throw new Error(`validate: type ${t} at ${path} is not implemented`);
    if (!typeOk[t](value)) return [`${path}: want ${t}, got ${JSON.stringify(value)}`];
  }
  if (schema.enum && !schema.enum.some((e) => e === value)) errs.push(`${path}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`);
  if (typeof value === "string") {
    const n = [...value].length; // JSON Schema counts code points
    if (schema.minLength !== undefined && n < schema.minLength) errs.push(`${path}: length ${n} < minLength ${schema.minLength}`);
    if (schema.maxLength !== undefined && n > schema.maxLength) errs.push(`${path}: length ${n} > maxLength ${schema.maxLength}`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errs.push(`${path}: ${value} < minimum ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errs.push(`${path}: ${value} > maximum ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) errs.push(`${path}: ${value.length} items < minItems ${schema.minItems}`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errs.push(`${path}: ${value.length} items > maxItems ${schema.maxItems}`);
    if (schema.items) value.forEach((v, i) => errs.push(...validate(schema.items, v, `${path}[${i}]`)));
  }
  if (typeOk.object(value)) {
    const props = schema.properties || {};
    for (const r of schema.required || []) if (!(r in value)) errs.push(`${path}: required member ${r} missing`);
    for (const [k, v] of Object.entries(value)) {
      if (k in props) errs.push(...validate(props[k], v, `${path}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${path}: member ${k} not allowed (additionalProperties false)`);
    }
  }
  return errs;
}

function parseJSON(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    fail(`${what}: not JSON (${e.message}): ${JSON.stringify(text)}`);
  }
}

const messages = [{ role: "user", content: "Describe a person as JSON." }];

// An object schema in OpenAI's strict form (every property required, no others) with
// string, integer, enum and array members; the bounds keep a random model's strings short.
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 150 },
    color: { type: "string", enum: ["red", "green", "blue"] },
    tags: { type: "array", items: { type: "string", maxLength: 6 }, minItems: 1, maxItems: 3 },
  },
  required: ["name", "age", "color", "tags"],
  additionalProperties: false,
};

await run("json_schema", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: "m", messages, max_tokens: 300, temperature: 1, seed,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema } },
    });
    const ch = r.choices[0];
    check(ch.finish_reason === "stop", `json_schema seed ${seed}: finish_reason ${ch.finish_reason}, want stop`, ch.message.content);
    const v = parseJSON(ch.message.content, `json_schema seed ${seed}`);
    const errs = validate(personSchema, v);
    check(errs.length === 0, `json_schema seed ${seed}: the reply does not validate: ${errs.join("; ")}`, ch.message.content);
  }
  return "3 seeds valid";
});

await run("json_object", async () => {
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({
      model: "m", messages, max_tokens: 300, temperature: 1, seed, response_format: { type: "json_object" },
    });
    const ch = r.choices[0];
    check(ch.finish_reason === "stop", `json_object seed ${seed}: finish_reason ${ch.finish_reason}, want stop`, ch.message.content);
    const v = parseJSON(ch.message.content, `json_object seed ${seed}`);
    check(v !== null && typeof v === "object" && !Array.isArray(v), `json_object seed ${seed}: not an object`, ch.message.content);
  }
  return "2 seeds";
});

// Two functions, as serve/tools_test.go's weatherTools.
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather", description: "Weather now.",
      parameters: {
        type: "object", properties: { city: { type: "string", maxLength: 8 }, unit: { type: "string", enum: ["c", "f"] } },
        required: ["city", "unit"], additionalProperties: false,
      },
    },
  },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {}, additionalProperties: false } } },
];
const toolSchemas = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

// checkCalls checks a finished choice: finish_reason tool_calls, want calls (or at least one
// when want is 0), each a function of the list whose arguments validate against its schema.
function checkCalls(what, choice, want, name) {
  const calls = choice.message.tool_calls;
  check(choice.finish_reason === "tool_calls", `${what}: finish_reason ${choice.finish_reason}, want tool_calls`, choice.message);
  check(Array.isArray(calls) && calls.length > 0 && (want === 0 || calls.length === want), `${what}: want ${want || "some"} tool_calls`, choice.message);
  for (const c of calls) {
    check(c.type === "function" && typeof c.id === "string" && c.id !== "", `${what}: call type/id`, c);
    check(c.function.name in toolSchemas && (!name || c.function.name === name), `${what}: function ${c.function.name}, want ${name || Object.keys(toolSchemas).join(" or ")}`, c);
    const args = parseJSON(c.function.arguments, `${what}: arguments of ${c.function.name}`);
    const errs = validate(toolSchemas[c.function.name], args);
    check(errs.length === 0, `${what}: arguments do not validate: ${errs.join("; ")}`, c.function.arguments);
  }
  return calls;
}

await run("tools", async () => {
  const choices = [
    ["required", "required", undefined],
    ["named", { type: "function", function: { name: "get_weather" } }, "get_weather"],
  ];
  for (const [label, tool_choice, name] of choices) {
    for (const seed of [0, 1]) {
      const params = {
        model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice,
        parallel_tool_calls: false, max_tokens: 400, temperature: 1, seed,
      };
      const what = `tools ${label} seed ${seed}`;
      const r = await client.chat.completions.create(params);
      const calls = checkCalls(what, r.choices[0], 1, name);
      // Streamed with the SDK's helper, which assembles the chunks' tool-call deltas.
      const s = client.chat.completions.stream(params);
      const fin = await s.finalChatCompletion();
      const sc = checkCalls(`${what} streamed`, fin.choices[0], 1, name);
      check(sc[0].function.name === calls[0].function.name && sc[0].function.arguments === calls[0].function.arguments,
        `${what}: streamed call differs from the whole reply's ${JSON.stringify(calls[0].function)}`, sc[0].function);
    }
  }
  // Parallel calls allowed: one or more, each valid.
  const r = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Weather and time?" }], tools, tool_choice: "required", max_tokens: 600, temperature: 1, seed: 5,
  });
  const par = checkCalls("tools required parallel", r.choices[0], 0);
  return `required+named x2 seeds, whole and streamed; parallel: ${par.length} call(s)`;
});

// checkContentLogprobs checks chat logprobs: one entry per generated content token (the
// end-of-turn token that ends a "stop" reply has no text and no entry), each logprob <= 0,
// top_logprobs n long and sorted, and the entries' bytes spell the content.
function checkContentLogprobs(what, content, text, finish, completionTokens, n) {
  check(Array.isArray(content), `${what}: logprobs.content missing`, content);
  const want = finish === "stop" ? completionTokens - 1 : completionTokens;
  check(content.length === want, `${what}: ${content.length} logprob entries for ${completionTokens} completion tokens (finish ${finish}), want ${want}`);
  const bytes = [];
  content.forEach((e, i) => {
    check(typeof e.token === "string" && Number.isFinite(e.logprob) && e.logprob <= 0, `${what}: entry ${i}`, e);
    check(Array.isArray(e.top_logprobs) && e.top_logprobs.length === n, `${what}: entry ${i} has ${e.top_logprobs?.length} top_logprobs, want ${n}`, e);
    e.top_logprobs.forEach((t, j) => {
      check(Number.isFinite(t.logprob) && t.logprob <= 0, `${what}: entry ${i} top ${j}`, t);
      check(j === 0 || t.logprob <= e.top_logprobs[j - 1].logprob, `${what}: entry ${i} top_logprobs not sorted`, e.top_logprobs);
    });
    check(e.logprob <= e.top_logprobs[0].logprob, `${what}: entry ${i}: the sampled token beats the most likely`, e);
    check(Array.isArray(e.bytes), `${what}: entry ${i} has no bytes`, e);
    bytes.push(...e.bytes);
  });
  // Valid UTF-8 must be the content exactly; a random model's invalid bytes are replaced.
  let decoded;
  try {
    decoded = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    decoded = null;
  }
  if (decoded !== null) check(decoded === text, `${what}: the entries' bytes spell ${JSON.stringify(decoded)}, content is`, text);
  else check(text.includes("\ufffd"), `${what}: the entries' bytes are not UTF-8 yet the content has no U+FFFD`, text);
}

await run("logprobs", async () => {
  // Free text (length-bound) and schema-bound text (ends with the end-of-turn token).
  const cases = [
    ["text", { max_tokens: 24 }],
    ["json_schema", { max_tokens: 300, response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema } } }],
  ];
  const seen = [];
  for (const [label, extra] of cases) {
    const params = { model: "m", messages, temperature: 1, seed: 7, logprobs: true, top_logprobs: 3, ...extra };
    const r = await client.chat.completions.create(params);
    const ch = r.choices[0];
    checkContentLogprobs(`logprobs ${label}`, ch.logprobs?.content, ch.message.content, ch.finish_reason, r.usage.completion_tokens, 3);
    // Streamed as raw chunks, assembled here; usage from stream_options.
    const s = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let text = "", finish = null, usage = null;
    const entries = [];
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta?.content ?? "";
        if (c.logprobs?.content) entries.push(...c.logprobs.content);
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    check(usage !== null, `logprobs ${label} streamed: no usage chunk`);
    checkContentLogprobs(`logprobs ${label} streamed`, entries, text, finish, usage.completion_tokens, 3);
    check(text === ch.message.content && JSON.stringify(entries) === JSON.stringify(ch.logprobs.content),
      `logprobs ${label}: the stream differs from the whole reply (same seed)`, { streamed: text, whole: ch.message.content });
    seen.push(`${label} ${entries.length} tokens`);
  }
  return `${seen.join(", ")}; top 3; streamed equal`;
});

// Legacy completions with logprobs (an integer): tokens, token_logprobs, top_logprobs and
// text_offset, one each per token; ignore_eos (llama.cpp's extension) makes it max_tokens.
await run("completions_logprobs", async () => {
  const n = 12, ntop = 3;
  const params = { model: "m", prompt: "The quick brown fox", max_tokens: n, temperature: 0, logprobs: ntop, ignore_eos: true };
  const r = await client.completions.create(params);
  const ch = r.choices[0], lp = ch.logprobs;
  check(ch.finish_reason === "length" && r.usage.completion_tokens === n, `completions: finish ${ch.finish_reason}, ${r.usage.completion_tokens} tokens, want length, ${n}`);
  check(lp && [lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset].every((a) => Array.isArray(a) && a.length === n),
    `completions: logprobs arrays are not ${n} long`, lp);
  let offset = 0;
  for (let i = 0; i < n; i++) {
    // The legacy top_logprobs is a dict keyed by token text: ntop alternatives plus the
    // sampled token if it is not among them; tokens sharing a text share a key (the special
    // and padding tokens print as "", lone bytes of a UTF-8 sequence as U+FFFD in JSON), so
    // fewer keys are right only when such a key is there.
    const keys = Object.keys(lp.top_logprobs[i]), top = Object.values(lp.top_logprobs[i]);
    const shared = keys.some((k) => k === "" || k.includes("\ufffd"));
    check(lp.token_logprobs[i] <= 0 && top.length >= 1 && (top.length >= ntop || shared) && top.length <= ntop + 1 && top.every((v) => v <= 0),
      `completions: entry ${i}`, { token: lp.tokens[i], logprob: lp.token_logprobs[i], top: lp.top_logprobs[i] });
    // Greedy: the token is the most likely one.
    check(lp.top_logprobs[i][lp.tokens[i]] === lp.token_logprobs[i] && lp.token_logprobs[i] === Math.max(...top),
      `completions: entry ${i} is not the most likely token under temperature 0`, { token: lp.tokens[i], logprob: lp.token_logprobs[i], top: lp.top_logprobs[i] });
    check(lp.text_offset[i] === offset, `completions: text_offset[${i}] ${lp.text_offset[i]}, want ${offset}`);
    offset += [...lp.tokens[i]].length;
  }
  check(lp.tokens.join("") === ch.text, `completions: the tokens do not spell the text`, { tokens: lp.tokens, text: ch.text });
  const s = await client.completions.create({ ...params, stream: true });
  const toks = [], lps = [];
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      if (c.logprobs) {
        toks.push(...c.logprobs.tokens);
        lps.push(...c.logprobs.token_logprobs);
      }
    }
  }
  check(JSON.stringify(toks) === JSON.stringify(lp.tokens) && JSON.stringify(lps) === JSON.stringify(lp.token_logprobs),
    "completions: streamed logprobs differ from the whole reply's", { streamed: toks, whole: lp.tokens });
  return `${n} tokens, streamed equal`;
});

// checkVector: embedDim floats of L2 norm 1 (within 1e-3).
function checkVector(what, v) {
  check(v.length === embedDim, `${what}: ${v.length} dimensions, want ${embedDim}`);
  let ss = 0;
  for (const x of v) {
    check(Number.isFinite(x), `${what}: a non-finite component`, String(x));
    ss += x * x;
  }
  const norm = Math.sqrt(ss);
  check(Math.abs(norm - 1) <= 1e-3, `${what}: L2 norm ${norm}, want 1 within 1e-3`);
  worstNorm = Math.max(worstNorm, Math.abs(norm - 1));
}
let worstNorm = 0;

// fromBase64 decodes an explicit base64 embedding: little-endian float32s.
function fromBase64(what, s) {
  check(typeof s === "string", `${what}: base64 embedding is not a string`, typeof s);
  const b = Buffer.from(s, "base64");
  check(b.length % 4 === 0, `${what}: ${b.length} bytes is not a whole number of float32s`);
  const out = [];
  for (let i = 0; i < b.length; i += 4) out.push(b.readFloatLE(i));
  return out;
}

await run("embeddings", async () => {
  const inputs = ["The quick brown fox", "jumps over the lazy dog", "kernelrt"];
  const byFormat = {};
  for (const format of ["float", "base64", undefined]) { // undefined: the SDK asks for base64 and decodes it
    const label = format ?? "default";
    const params = { model: "m", input: inputs, ...(format ? { encoding_format: format } : {}) };
    const r = await client.embeddings.create(params);
    check(r.object === "list" && r.data.length === inputs.length, `embeddings ${label}: ${r.data?.length} vectors for ${inputs.length} inputs`, r);
    byFormat[label] = r.data.map((d, i) => {
      check(d.object === "embedding" && d.index === i, `embeddings ${label}: data[${i}] object/index`, { object: d.object, index: d.index });
      const v = format === "base64" ? fromBase64(`embeddings ${label} [${i}]`, d.embedding) : d.embedding;
      check(Array.isArray(v) || format === "base64", `embeddings ${label}: data[${i}].embedding is not an array`, typeof v);
      checkVector(`embeddings ${label} [${i}]`, v);
      return v;
    });
    check(r.usage && r.usage.prompt_tokens > 0, `embeddings ${label}: usage`, r.usage);
    // One string input: the same vector as the first of the array.
    const one = await client.embeddings.create({ ...params, input: inputs[0] });
    check(one.data.length === 1, `embeddings ${label} string input: ${one.data.length} vectors`);
    const v = format === "base64" ? fromBase64(`embeddings ${label} string`, one.data[0].embedding) : one.data[0].embedding;
    checkVector(`embeddings ${label} string`, v);
    check(v.every((x, j) => Math.abs(x - byFormat[label][0][j]) <= 1e-6), `embeddings ${label}: a string input's vector differs from the same text in an array`);
  }
  // The three encodings carry the same float32s; different texts give different vectors.
  for (const label of ["base64", "default"]) {
    check(byFormat[label].every((v, i) => v.every((x, j) => Math.abs(x - byFormat.float[i][j]) <= 1e-6)),
      `embeddings: ${label} vectors differ from float ones`);
  }
  check(byFormat.float[0].some((x, j) => Math.abs(x - byFormat.float[1][j]) > 1e-4), "embeddings: two different texts gave the same vector");
  return `float/base64/default, string and array, dim ${embedDim}, max |norm-1| ${worstNorm.toExponential(1)}`;
});

console.log(`openai-node: PASS with openai ${VERSION} on node ${process.version}: ${passed.join(", ")}`);
