"""checks.bundle.redact: what is masked, what is kept, and that only names reach the list."""

from __future__ import annotations

import pytest

from checks.bundle.redact import (
    REDACTED,
    Pseudonyms,
    Redactor,
    is_secret_name,
    redact_env,
    redact_recording,
    summarise,
)
from probes.host import CommandResult
from probes.recording.model import CommandRecord, FileRecord, Manifest, RangeRecord, Recording


@pytest.mark.parametrize("name", ["HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                                  "OPENAI_API_KEY", "DB_PASSWORD", "MYSQL_PASSWD", "OBS_AK",
                                  "OBS_SK", "GOOGLE_APPLICATION_CREDENTIALS", "SESSION",
                                  "apiKey", "accessToken", "PRIVATE_KEY", "AUTH", "COOKIE"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "PWD", "TASK_QUEUE_ENABLE", "ASCEND_HOME_PATH",
                                  "TOKENIZERS_PARALLELISM", "bos_token", "pad_token_id",
                                  "max_tokens", "additional_special_tokens", "KEYBOARD_LAYOUT",
                                  "LD_LIBRARY_PATH", "HCCL_CONNECT_TIMEOUT"])
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(("text", "expected", "kind"), [
    ("pip install -i https://bob:hunter2@pypi.corp/simple x",
     "pip install -i https://<redacted>@pypi.corp/simple x", "url-credentials"),
    ("Authorization: Bearer abc.def.ghi", "Authorization: <redacted>", "authorization"),
    ("curl -H 'x' bearer eyJhbGciOiJIUzI1NiJ9", "curl -H 'x' bearer <redacted>", "bearer-token"),
    ("serve --api-key=sk-123456 --max-tokens 512", "serve --api-key=<redacted> --max-tokens 512",
     "secret-argument"),
    ("serve --password 'pa ss'", "serve --password '<redacted>'", "secret-argument"),
    ("export HF_TOKEN=hf_abcdef; echo ok", "export HF_TOKEN=<redacted>; echo ok",
     "secret-assignment"),
    ('{"api_key": "k-1", "bos_token": "<s>"}', '{"api_key": "<redacted>", "bos_token": "<s>"}',
     "secret-assignment"),
    ("password: swordfish\nuser: me", "password: <redacted>\nuser: me", "secret-assignment"),
])
def test_text_rules(text: str, expected: str, kind: str) -> None:
    redactor = Redactor()
    assert redactor.text(text, "here") == expected
    assert {(r.kind, r.where) for r in redactor.redactions} == {(kind, "here")}


def test_plain_text_is_left_alone() -> None:
    text = ("Basic information about the bearer of this card; version=7.7.0.1.231; "
            "| 0  910B4 | OK | 93.2 | 39 |")
    redactor = Redactor()
    assert redactor.text(text, "x") == text
    assert not redactor.redactions


def test_known_secrets_are_masked_wherever_they_appear() -> None:
    redactor = Redactor(known={"tok-123456"})
    assert redactor.text("echo tok-123456 done", "log") == f"echo {REDACTED} done"
    assert [r.kind for r in redactor.redactions] == ["known-secret"]


def test_bytes_keep_their_length() -> None:
    data = b"\x00\x01 https://u:secretpw@h.example.com/ \xff tok-123456 \x00"
    masked = Redactor(known={"tok-123456"}).data(data, "blob")
    assert len(masked) == len(data)
    assert b"secretpw" not in masked and b"tok-123456" not in masked
    assert masked.startswith(b"\x00\x01 https://") and masked.endswith(b" \x00")


def test_env_keeps_names_and_lists_them() -> None:
    redactor = Redactor()
    env = redact_env({"HF_TOKEN": "abc", "HOME": "/root", "EMPTY_SECRET": ""}, redactor)
    assert env == {"HF_TOKEN": REDACTED, "HOME": "/root", "EMPTY_SECRET": ""}
    assert summarise(redactor.redactions) == ["secret-env: 1 variable: HF_TOKEN"]


def test_hostnames_and_addresses_are_replaced_consistently() -> None:
    redactor = Redactor(pseudonyms=Pseudonyms(["atlas-07"]))
    text = ("atlas-07 joined 10.1.2.3 and 10.1.2.4; atlas-07 again at 10.1.2.3, "
            "fe80::1ff:fe23:4567:890a, loopback 127.0.0.1 and ::1; driver 7.7.0.1.231; "
            "bus 0000:c1:00.0 at 12:00:00")
    out = redactor.text(text, "log")
    assert out == ("host-1 joined ip-1 and ip-2; host-1 again at ip-1, ip-3, loopback 127.0.0.1 "
                   "and ::1; driver 7.7.0.1.231; bus 0000:c1:00.0 at 12:00:00")


def _recording(env: dict[str, str]) -> Recording:
    result = CommandResult(("tool", "--token", "tok-abcdef"), "exited", 0,
                           stdout="got tok-abcdef", stderr="")
    return Recording(
        manifest=Manifest("ascend-snapshot/1.1", "2025-01-01T00:00:00Z", "h", "/", "t"),
        env=env,
        commands=(CommandRecord(result, None),),
        files={"/etc/x": FileRecord(text="k=tok-abcdef"),
               "/var/log/p.log": FileRecord(ranges=(RangeRecord(0, 64, data=b"tok-abcdef!"),))},
    )


def test_a_recording_is_redacted_everywhere_without_touching_the_original() -> None:
    original = _recording({"API_TOKEN": "tok-abcdef", "HOME": "/root"})
    redacted = redact_recording(original)
    rec = redacted.recording
    assert rec.env == {"API_TOKEN": REDACTED, "HOME": "/root"}
    assert rec.commands[0].result.argv == ("tool", "--token", REDACTED)
    assert "tok-abcdef" not in rec.commands[0].result.stdout
    assert rec.files["/etc/x"].text == f"k={REDACTED}"
    data = rec.files["/var/log/p.log"].ranges[0].data
    assert data is not None and b"tok-abcdef" not in data and len(data) == 11
    assert original.env == {"API_TOKEN": "tok-abcdef", "HOME": "/root"}  # pure
    assert all("tok-abcdef" not in r.where for r in redacted.redactions)


def test_structural_files_are_data_not_text() -> None:
    import json
    import struct

    index = json.dumps({"metadata": {"total_size": 1000},
                        "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.sft",
                                       "lm_head.weight": "model-00002-of-00002.sft"}})
    config = json.dumps({"model_type": "qwen3", "hub_token": "hf_" + "a1B2c3D4e5" * 4,
                         "vocab_size": 151936})
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "BF16", "shape": [8, 4],
                                                       "data_offsets": [0, 64]}}).encode()
    blob = struct.pack("<Q", len(header)) + header
    secret = "tok-abcdef123"
    recording = Recording(
        manifest=Manifest("1", "2025-06-01T00:00:00Z", "h", "/", "t"),
        env={"HF_TOKEN": secret},
        files={"/m/model.safetensors.index.json": FileRecord(text=index),
               "/m/config.json": FileRecord(text=config),
               "/m/model-00001-of-00002.safetensors": FileRecord(
                   ranges=(RangeRecord(0, None, data=blob + secret.encode()),)),
               "/etc/other": FileRecord(text="model-00001-of-00002.sft")})
    rec = redact_recording(recording).recording
    assert rec.files["/m/model.safetensors.index.json"].text == index  # byte for byte
    assert rec.files["/etc/other"].text == "model-00001-of-00002.sft"  # not learned
    kept = json.loads(str(rec.files["/m/config.json"].text))
    assert kept["model_type"] == "qwen3" and kept["vocab_size"] == 151936
    assert kept["hub_token"] == REDACTED  # a secret inside a string value is masked
    data = rec.files["/m/model-00001-of-00002.safetensors"].ranges[0].data
    assert data is not None and data[: len(blob)] == blob  # the header is untouched
    assert secret.encode() not in data and len(data) == len(blob) + len(secret)


def test_a_tokenizer_json_is_kept_byte_for_byte() -> None:
    """Its vocabulary and merges are token names (`token`, `password`...), not assignments:
    a replay builds the tokenizer from the recorded text, so it must stay as read."""
    import json

    tokenizer = json.dumps({"model": {"type": "BPE",
                                      "vocab": {"token": 0, "=": 1, "password": 2, "abc": 3},
                                      "merges": ["tok en", "pass word", "token =abc"]},
                            "added_tokens": [{"id": 4, "content": "<|im_start|>"}]})
    recording = Recording(manifest=Manifest("1", "2025-06-01T00:00:00Z", "h", "/", "t"),
                          files={"/m/tokenizer.json": FileRecord(text=tokenizer)})
    assert redact_recording(recording).recording.files["/m/tokenizer.json"].text == tokenizer


# -- properties: every spelling, any value -----------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from checks.bundle.pseudonyms import Pseudonyms as _Pseudonyms  # noqa: E402

SPELLINGS = [
    "token = {v}", "token={v}", "--token={v}", "--password {v}", "mysql -uroot -p{v} -h x",
    "{{'password': '{v}'}}", '{{"api_key": "{v}"}}', "AK:{v}", "access_key_id: {v}",
    "X-Auth-Token: {v}", "GET /x?x-obs-security-token={v}&a=1", "password%3D{v}%26x",
    "export SSHPASS={v}", "MYSQL_PWD={v} mysql", "CUSTOM_CREDS: {v}", "NUM_SECRETS={v}",
    "Authorization: Bearer {v}", "https://user:{v}@host.example.com/x", "secret: {v} and more",
]
# a value starting with `-` after a space is a flag to any reader (`--password -x` in free text
# is not found; in a command's argv it is, by position)
VALUE = st.text(alphabet=st.sampled_from("abcdefXYZ0123456789._-~+"), min_size=8,
                max_size=40).filter(lambda v: not v.startswith("-"))


@settings(max_examples=300, deadline=None)
@given(template=st.sampled_from(SPELLINGS), value=VALUE, before=st.text(max_size=20),
       after=st.sampled_from(["", "\n", " ok", ";", "\nnext=line"]))
def test_a_named_secret_never_survives(template: str, value: str, before: str,
                                       after: str) -> None:
    text = before + "\n" + template.format(v=value) + after
    redactor = Redactor()
    redactor.learn(text)  # the bundle's first pass: the value is then masked everywhere
    assert value not in redactor.text(text, "t")
    masked = redactor.data(text.encode(), "t")
    assert value.encode() not in masked and len(masked) == len(text.encode())


@settings(max_examples=200, deadline=None)
@given(value=st.text(alphabet=st.sampled_from("abcXYZ0189@/:%._-"), min_size=8, max_size=30))
def test_a_url_password_with_at_and_slash_never_survives(value: str) -> None:
    text = f"pip -i https://bob:{value}@pypi.example.com/simple"
    assert value not in Redactor().text(text, "t")


LABEL = st.from_regex(r"[a-z][a-z0-9-]{2,12}[0-9]", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(name=LABEL, before=st.sampled_from(["", "_", "/", "x", "[", "-"]),
       after=st.sampled_from(["", "_worker0", ".corp", "/log", "-7", ":29500", "X"]),
       upper=st.booleans())
def test_the_host_name_never_survives(name: str, before: str, after: str, upper: bool) -> None:
    shown = name.upper() if upper else name
    text = f"started on {before}{shown}{after} at 010.020.030.040 and ip-10-20-30-41"
    redactor = Redactor(pseudonyms=_Pseudonyms([name]))
    for out in (redactor.text(text, "t"), redactor.data(text.encode(), "t").decode()):
        assert name not in out.lower()
        assert "10.20.30.40" not in out and "010.020" not in out and "10-20-30-41" not in out


HUMAN = "Summer12Rose!"  # a human-chosen value: no entropy rule can find it
RANDOM = "Zq7Xv2Lm9PkR4tYw8NbC3sHd6GfJ"


@pytest.mark.parametrize("value", [HUMAN, RANDOM])
@pytest.mark.parametrize("template", [
    "ASCEND_AUTHCODE={v}",
    "[plog] GET /o?AWSAccessKeyId={v}&Signature={v}&Expires=1",
    "ak is {v}, sk is {v}",
    "GET /cb?a=1%26token%3D{v}%26b=2",
    "token%3D{v}",
    "sqlite:///var/db?password={v}",
    "db.example.com:5432:orders:svc:{v}",
    "*:*:*:postgres:{v}",
    "curl -u admin:{v} http://10.0.0.9/health",
    "curl --user 'admin:{v}' http://x",
    "<password>{v}</password>",
    "<AccessKeySecret>{v}</AccessKeySecret>",
])
def test_human_chosen_secrets_are_masked(template: str, value: str) -> None:
    from checks.bundle.redact_rules import secret_spans

    text = template.format(v=value)
    masked = text
    for start, end, _ in reversed(secret_spans(text)):
        masked = masked[:start] + "*" + masked[end:]
    assert value not in masked and "Summer" not in masked


@pytest.mark.parametrize("text", ["the key is ready", "it is fine", "<name>qwen3</name>",
                                  "10:30:00 a:b:c", "curl -v http://x"])
def test_ordinary_text_keeps_its_words(text: str) -> None:
    from checks.bundle.redact_rules import secret_spans

    assert secret_spans(text) == []


def test_a_pod_dns_name_is_pseudonymised() -> None:
    from checks.bundle.pseudonyms import Pseudonyms

    kinds: set[str] = set()
    text = "connect 10-244-1-5.serving.pod.cluster.local:8000 from 10.244.1.5"
    out = Pseudonyms().apply(text, lambda original, pseudonym: pseudonym, kinds)
    assert "10-244-1-5" not in out and "10.244.1.5" not in out
    assert out.count("ip-1") == 2 and "ip-address" in kinds
