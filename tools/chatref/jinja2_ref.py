"""Render chat/testdata's templates and cases with Python's Jinja2, the engine Hugging Face
transformers' apply_chat_template uses: the second reference of the chat package, for what
llama-server cannot show (add_generation_prompt=false; templates its engine cannot parse).

    TZ=UTC python3 tools/chatref/jinja2_ref.py [chat/testdata]

Writes jinja2/<template>/<case>.gen.txt and .nogen.txt, with the whitespace options and
globals llama.cpp uses (trim_blocks, lstrip_blocks, raise_exception, strftime_now at the
date in expected/now.txt) and, like llama.cpp, a leading BOS and trailing EOS text removed.
"""
import datetime
import glob
import json
import os
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIALS = {"qwen": ("<|endoftext|>", "<|im_end|>"), "llama": ("<|begin_of_text|>", "<|eot_id|>")}


def main(d):
    cases = json.load(open(os.path.join(d, "cases.json")))
    day = datetime.date.fromisoformat(open(os.path.join(d, "expected", "now.txt")).read().strip())

    def raise_exception(msg):
        raise Exception(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: day.strftime(f)
    for path in sorted(glob.glob(os.path.join(d, "templates", "*.jinja"))):
        name = os.path.basename(path)[: -len(".jinja")]
        bos, eos = SPECIALS["qwen" if name.startswith("qwen") else "llama"]
        tmpl = env.from_string(open(path, encoding="utf-8").read())
        out = os.path.join(d, "jinja2", name)
        os.makedirs(out, exist_ok=True)
        for c in cases:
            for gen in (True, False):
                s = tmpl.render(messages=c["messages"], add_generation_prompt=gen, bos_token=bos, eos_token=eos)
                if s.startswith(bos):
                    s = s[len(bos):]
                if s.endswith(eos):
                    s = s[: -len(eos)]
                suffix = ".gen.txt" if gen else ".nogen.txt"
                with open(os.path.join(out, c["name"] + suffix), "w", encoding="utf-8", newline="") as f:
                    f.write(s)
        print("rendered", name)


main(sys.argv[1] if len(sys.argv) > 1 else "chat/testdata")
