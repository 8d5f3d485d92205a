"""Render chat/testdata/tools/case.json (a conversation with tools and a tool call) with
Python's Jinja2 and Hugging Face's tojson (json.dumps, ensure_ascii=False, key order as
given: the case's objects list their keys sorted, which is the order kernelrt's tojson
prints), the reference of chat's TestToolsMatchJinja2.

    python3 tools/chatref/jinja2_tools.py [chat/testdata]
"""
import json
import os
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIALS = {"qwen": ("<|endoftext|>", "<|im_end|>"), "llama": ("<|begin_of_text|>", "<|eot_id|>")}


def main(d):
    case = json.load(open(os.path.join(d, "tools", "case.json")))
    msgs = case["messages"]
    for m in msgs:  # templates see the arguments as an object, as HF's apply_chat_template gets them
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])

    def raise_exception(msg):
        raise Exception(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: "26 Jul 2024"
    for name in ("qwen2.5", "qwen3", "llama3.1"):
        bos, eos = SPECIALS["qwen" if name.startswith("qwen") else "llama"]
        tmpl = env.from_string(open(os.path.join(d, "templates", name + ".jinja"), encoding="utf-8").read())
        s = tmpl.render(messages=msgs, tools=case["tools"], add_generation_prompt=True, bos_token=bos, eos_token=eos)
        if s.startswith(bos):
            s = s[len(bos):]
        if s.endswith(eos):
            s = s[: -len(eos)]
        with open(os.path.join(d, "tools", name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(s)
        print("rendered", name)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "chat/testdata")
