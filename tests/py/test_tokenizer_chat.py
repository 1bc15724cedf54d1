"""Chat formats: `kvbench tokenize --chat` renders conversations (first turn
+ continuations) exactly as the families' Jinja templates do, rendered here
with jinja2 the way transformers' apply_chat_template does (sandboxed,
trim_blocks, lstrip_blocks):

* ChatML: SmolLM2's template read from the default model's GGUF, and the
  common ChatML template without a default system message (chatml-nosys);
* Llama-3: the template of meta-llama/Meta-Llama-3-8B-Instruct
  (tokenizer_config.json, copied below as data);
* Mistral: the template of mistralai/Mistral-7B-Instruct-v0.2
  (tokenizer_config.json, as embedded in its GGUF conversions), which has no
  system role: our system text is the first user message's prefix + "\\n\\n";
* Vicuna v1.1 (LongChat): FastChat's vicuna_v1.1 conversation
  (SeparatorStyle.ADD_COLON_TWO, sep " ", sep2 "</s>"), reimplemented below
  from FastChat's Conversation.get_prompt.

Also: the turn-by-turn token ids on SmolLM2 equal HF's ids of the whole
rendered conversation, and the format is detected from the template.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

jinja2 = pytest.importorskip("jinja2")
pytest.importorskip("gguf")
import jinja2.sandbox  # noqa: E402

import tokenizer_ref as ref  # noqa: E402

BIN = os.environ.get("KVBENCH_BIN", "")
MODEL = os.environ.get("KVBENCH_MODEL_FILE", "")
pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason="KVBENCH_BIN not built")

# meta-llama/Meta-Llama-3-8B-Instruct, tokenizer_config.json "chat_template"
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
# mistralai/Mistral-7B-Instruct-v0.2, tokenizer_config.json "chat_template"
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}"
)
# The usual ChatML template (no default system message), e.g. OpenHermes-2.5.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                 "The assistant gives helpful, detailed, and polite answers to the user's questions.")


def render(template, messages, bos="", eos=""):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token=bos, eos_token=eos)


def fastchat_vicuna(system, msgs):
    """FastChat Conversation.get_prompt, SeparatorStyle.ADD_COLON_TWO."""
    seps = [" ", "</s>"]
    ret = system + seps[0]
    turns = [("USER", m) if i % 2 == 0 else ("ASSISTANT", m) for i, m in enumerate(msgs)]
    turns.append(("ASSISTANT", None))
    for i, (role, message) in enumerate(turns):
        if message:
            ret += role + ": " + message + seps[i % 2]
        else:
            ret += role + ":"
    return ret


USERS = ["Hi there!", "  What is 2+2?\n", "Explain KV caches\nin two lines.", "日本語で？ 👋"]
ANSWERS = ["Hello! How can I help?", "4", " It stores keys and values.\nIt grows per token. "]


def conversations():
    out = []
    for n in (1, 2, 3):
        msgs = []
        for k in range(n):
            msgs.append(USERS[(k + n) % len(USERS)])
            if k < n - 1:
                msgs.append(ANSWERS[(k + n) % len(ANSWERS)])
        for system in (None, "You are terse.", "  Be kind. "):
            out.append({"system": system, "messages": msgs})
    return out


def as_messages(conv, system_default=None):
    msgs = []
    system = conv["system"] if conv["system"] is not None else system_default
    if system is not None:
        msgs.append({"role": "system", "content": system})
    for i, m in enumerate(conv["messages"]):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": m})
    return msgs


def tiny_model(tmp_path, template=None, model="gpt2"):
    """A tokenizer-only GGUF (any vocab does for rendering text)."""
    path = tmp_path / ("tiny-%d.gguf" % abs(hash((template, model))))
    if model == "gpt2":
        tokens = [chr(c) for c in range(33, 127)] + ["ab"]
        ref.write_tokenizer_gguf(path, "gpt2", tokens, merges=["a b"], pre="gpt2", chat_template=template)
    else:
        tokens = ["<unk>", "<s>", "</s>", "a"]
        ref.write_tokenizer_gguf(path, "llama", tokens, types=[2, 3, 3, 1], scores=[0, 0, 0, -1],
                                 chat_template=template)
    return path


def kvbench_chat(model, fmt, convs, tmp_path, text=True):
    p = tmp_path / "conv.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c) + "\n")
    args = [BIN, "tokenize", "-m", str(model), "--chat", fmt, "--jsonl", str(p)]
    if text:
        args.append("--print-text")
    r = subprocess.run(args, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(convs)
    return [json.loads(ln) for ln in lines] if text else [[int(x) for x in ln.split()] for ln in lines]


@pytest.fixture(scope="module")
def smol_info():
    if not os.path.exists(MODEL):
        pytest.skip("KVBENCH_MODEL_FILE absent")
    return ref.read_gguf_tokenizer(MODEL)


def test_chatml_smollm2_template_text(smol_info, tmp_path):
    tmpl = smol_info["chat_template"]
    convs = conversations()
    got = kvbench_chat(MODEL, "auto", convs, tmp_path)
    for c, g in zip(convs, got):
        assert g == render(tmpl, as_messages(c)), c


def test_chatml_smollm2_ids_equal_whole_conversation(smol_info, tmp_path):
    info = smol_info
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    convs = conversations()
    got = kvbench_chat(MODEL, "auto", convs, tmp_path, text=False)
    for c, g in zip(convs, got):
        want = hf.encode(render(info["chat_template"], as_messages(c)), add_special_tokens=False).ids
        assert g == want, c


def test_llama3_template(tmp_path):
    convs = conversations()
    got = kvbench_chat(tiny_model(tmp_path), "llama3", convs, tmp_path)
    for c, g in zip(convs, got):
        assert g == render(LLAMA3_TEMPLATE, as_messages(c), bos="<|begin_of_text|>"), c


def test_mistral_template(tmp_path):
    convs = conversations()
    got = kvbench_chat(tiny_model(tmp_path), "mistral", convs, tmp_path)
    for c, g in zip(convs, got):
        msgs = list(c["messages"])
        if c["system"] is not None:
            msgs[0] = c["system"] + "\n\n" + msgs[0]
        want = render(MISTRAL_TEMPLATE, as_messages({"system": None, "messages": msgs}),
                      bos="<s>", eos="</s>")
        assert g == want, c


def test_vicuna_fastchat(tmp_path):
    convs = conversations()
    got = kvbench_chat(tiny_model(tmp_path), "vicuna", convs, tmp_path)
    for c, g in zip(convs, got):
        system = c["system"] if c["system"] is not None else VICUNA_SYSTEM
        assert g == fastchat_vicuna(system, c["messages"]), c


def test_chatml_nosys_template(tmp_path):
    convs = conversations()
    got = kvbench_chat(tiny_model(tmp_path, CHATML_TEMPLATE), "auto", convs, tmp_path)
    for c, g in zip(convs, got):
        assert g == render(CHATML_TEMPLATE, as_messages(c)), c


@pytest.mark.parametrize("template,model,want", [
    (LLAMA3_TEMPLATE, "gpt2", "llama3"),
    (MISTRAL_TEMPLATE, "llama", "mistral"),
    (CHATML_TEMPLATE, "gpt2", "chatml-nosys"),
    (None, "llama", "vicuna"),
    (None, "gpt2", "raw"),
])
def test_detection(tmp_path, template, model, want):
    path = tiny_model(tmp_path, template, model)
    convs = [{"system": None, "messages": ["hi"]}]
    assert kvbench_chat(path, "auto", convs, tmp_path) == kvbench_chat(path, want, convs, tmp_path)
    # and a different format renders differently (the comparison can fail)
    other = "raw" if want != "raw" else "chatml"
    assert kvbench_chat(path, "auto", convs, tmp_path) != kvbench_chat(path, other, convs, tmp_path)
