"""Planted secrets (issue #16's spellings): no byte of any of them reaches a bundle; with
--redact-hostnames no byte of the host name or its addresses either, and the bundle replays."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import FakeRoot
from machines import build_a2
from test_bundle import PLOG, RECORDINGS, bundle, members

from probes.live import LiveHost

# Each value is distinctive, and none of them is random-looking: the rules that find them
# are the named ones, not the entropy one (that has its own entries).
ENV_SECRETS = {
    "MYSQL_PWD": "mysql-pwd-value-41",
    "SSHPASS": "sshpass-value-42",
    "GITHUB_PAT": "github-pat-value-43",
    "CI_JOB_JWT_V2": "ci-jwt-value-44",
    "SLACK_WEBHOOK": "https://hooks.slack.com/services/slack-hook-value-45",
    "CUSTOM_CREDS": "custom-creds-value-46",
    "NUM_SECRETS": "num-secrets-value-47",
    "DEPLOY_THING": "plain-name-value-48",  # a name that says nothing: withheld all the same
    "HF_TOKEN": "hf-token-value-49",
    "ASCEND_AUTHCODE": "Summer12Rose!authcode",  # allow-listed prefix, secret-shaped name
}
TEXT_SECRETS = {
    "spaced assignment": ("token = {v}", "spaced-token-value-51"),
    "glued -p": ("mysql -uroot -p{v} -h db", "glued-p-value-52"),
    "python repr": ("{{'user': 'svc', 'password': '{v}'}}", "repr-dict-value-53"),
    "url-encoded form": ("POST /login user=a&password%3D{v}%26next=1", "urlenc-form-value-54"),
    "url-encoded userinfo": ("https://alice:{v}@repo.example.com/x", "urlenc%40user%2Fvalue55"),
    "url password with @ and /": ("pip -i https://bob:{v}@pypi.example.com/simple",
                                  "url@pass/word-value-56"),
    "AK:": ("obs client AK:{v} ready", "obs-ak-value-57"),
    "access_key_id:": ("[INFO] access_key_id: {v}", "access-key-id-value-58"),
    "X-Auth-Token": ("header X-Auth-Token: {v}", "x-auth-token-value-59"),
    "x-obs-security-token": ("GET /b?x-obs-security-token={v}&a=1", "obs-sec-token-value-60"),
    "authorization": ("Authorization: Basic {v}", "QmFzaWMtdmFsdWUtNjE="),
    "bearer": ("curl -H 'Authorization: Bearer {v}'", "bearer-value-62xyz"),
    "json key": ('{{"api_key": "{v}"}}', "json-api-key-value-63"),
    "yaml line": ("secret_access_key: {v} with spaces", "yaml-secret-value-64"),
    "github token format": ("pushed with {v}", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "random token": ("session restored {v} ok", "Zq7Xv2Lm9PkR4tYw8NbC3sHd6GfJ"),
    "private key": ("-----BEGIN RSA PRIVATE KEY-----\n{v}\n-----END RSA PRIVATE KEY-----",
                    "private-key-body-value-65"),
    # human-chosen values (issue #29): low entropy, so only the spelling can find them
    "pgpass line": ("db.example.com:5432:orders:svc:{v}", "Summer12Rose!pg"),
    "curl -u": ("curl -u admin:{v} http://10.0.0.9/health", "Summer12Rose!curl"),
    "xml element": ("<password>{v}</password>", "Summer12Rose!xml"),
    "ak is, sk is": ("obs: ak is {v}, region cn-1", "Summer12Rose!ak"),
    "encoded after &": ("GET /cb?a=1%26token%3D{v}%26b=2", "Summer12Rose!enc"),
    "plog AWSAccessKeyId": ("[plog] GET /o?AWSAccessKeyId={v}&Expires=1", "Summer12Rose!aws"),
    "sqlite url": ("sqlite:///var/db?password={v}", "Summer12Rose!sql"),
}
ALLOWED_ENV_WITH_SECRETS = {  # allowed names whose *values* hold a secret
    "VLLM_REMOTE_STORE": "https://carol:{v}@store.example.com/m",
    "HCCL_DEBUG_NOTE": "token={v}",
}
ALLOWED_SECRET_VALUES = {"VLLM_REMOTE_STORE": "vllm@store/pass-value-71",
                         "HCCL_DEBUG_NOTE": "hccl-note-token-value-72"}
# split by the start of a plog tail: its last 39 characters are inside the tail
CUT_SECRET = "tail-cut-secret-value-81-abcdefghijklmnopqrstuvwxyz0123456789"
SQLITE_SECRET = "Sq7LiteOverflowXv2Lm9PkR4tYw8Nb"  # random-looking: found by the entropy rule
SQLITE_HUMAN_SECRET = "Summer12Rose!sqlite"  # human-chosen: found by its name only
ECHOED = ENV_SECRETS["DEPLOY_THING"]  # a withheld value echoed in a log and a recording


def _text_lines() -> list[str]:
    return [template.format(v=value) for template, value in TEXT_SECRETS.values()]


def _all_secrets() -> list[str]:
    values = [*ENV_SECRETS.values(), *(v for _, v in TEXT_SECRETS.values()),
              *ALLOWED_SECRET_VALUES.values(), CUT_SECRET, SQLITE_SECRET, SQLITE_HUMAN_SECRET]
    return values


def _recording(path: Path) -> None:
    """A console recording whose long payloads span several SQLite overflow pages, with the
    secret written at many offsets (some of them across a page boundary)."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL, "
                     "kind TEXT, payload TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema', 'ascend-console-recording/1')")
        conn.execute("INSERT INTO meta VALUES ('note', ?)", (f"password={SQLITE_SECRET}",))
        conn.execute("INSERT INTO meta VALUES ('dsn', ?)", (f"password={SQLITE_HUMAN_SECRET}",))
        for shift in range(0, 4096, 509):
            # a withheld value with no name beside it: only its whole, assembled text matches
            body = "x" * shift + f" {ECHOED} {SQLITE_SECRET}" * 400
            conn.execute("INSERT INTO samples (t, kind, payload) VALUES (1.0, 'host', ?)",
                         (json.dumps({"error": body}),))
        conn.execute("INSERT INTO samples (t, kind, payload) VALUES (2.0, 'host', ?)",
                     (json.dumps({"error": f"deploy {ECHOED} failed"}),))
        conn.execute("INSERT INTO samples (t, kind, payload) VALUES (2.0, 'host', ?)",
                     (json.dumps({"log": _text_lines()}),))
    conn.close()


def plant(root: FakeRoot) -> LiveHost:
    host = build_a2(root)
    env = dict(host.env) | ENV_SECRETS | {
        name: template.format(v=ALLOWED_SECRET_VALUES[name])
        for name, template in ALLOWED_ENV_WITH_SECRETS.items()}
    lines = _text_lines()
    # npu-smi prints half of the spellings on stdout and stderr, as a wrapper script might
    corpus = (root.path / "usr/local/bin/npu-smi").read_text()
    echo = "".join(f"printf '%s\\n' {json.dumps(line)}\n" for line in lines[:8])
    echo += "".join(f"printf '%s\\n' {json.dumps(line)} >&2\n" for line in lines[8:12])
    root.script("/usr/local/bin/npu-smi", corpus.removeprefix("#!/bin/sh\n").replace(
        "case", echo + "case", 1))
    driver = root.path / "usr/local/Ascend/driver/version.info"
    driver.write_text(driver.read_text() + "\n".join(lines) + "\n")
    plog = "\n".join([*lines, f"deploy {ECHOED} failed"]) + "\n"
    root.file(f"{PLOG}/plog-1_20250101120000000.log", plog)
    # a tail of 256 KiB that starts inside a secret: the first half stays outside the tail
    filler = ("[INFO] steady state, nothing to see here\n" * 7000)[: 256 * 1024 - 40]
    root.file("/root/ascend/log/run/plog/plog-2_20250101120100000.log",
              f"[INFO] start\n[ERROR] token={CUT_SECRET}\n{filler}")
    _recording(root.path / RECORDINGS.lstrip("/") / "box-20250101T120000Z.sqlite")
    return LiveHost(root=host.root, env=env, python=host.python)


def test_no_byte_of_a_planted_secret_reaches_the_bundle(fake_root: FakeRoot, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    (fake_root.path / RECORDINGS.lstrip("/")).mkdir(parents=True)
    host = plant(fake_root)
    out = tmp_path / "planted.tar.gz"
    assert bundle(fake_root, host, out) == 0
    summary = capsys.readouterr().out
    raw = gzip.decompress(out.read_bytes())
    for secret in _all_secrets():
        for piece in (secret, secret[: len(secret) // 2], secret[len(secret) // 2 :]):
            assert piece.encode() not in raw, (secret, piece)
    found = members(out)
    # what was planted was captured: the places are there, the values are not
    assert "metrics/box-20250101T120000Z.sqlite" in found
    assert "plog/run/plog/plog-2_20250101120100000.log" in found
    env = json.loads(found["env.json"])
    assert env["DEPLOY_THING"] == "<withheld>" and env["MYSQL_PWD"] == "<redacted>"
    assert env["VLLM_REMOTE_STORE"] == "https://<redacted>@store.example.com/m"
    for name in ENV_SECRETS:
        assert name in summary
    assert "withheld-env" in summary


def test_a_planted_bundle_still_replays(fake_root: FakeRoot, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (fake_root.path / RECORDINGS.lstrip("/")).mkdir(parents=True)
    host = plant(fake_root)
    out = tmp_path / "planted.tar.gz"
    assert bundle(fake_root, host, out) == 0
    recorded = json.loads(members(out)["report.json"])
    capsys.readouterr()
    from checks.cli import main

    main(["--from", str(out), "--json"])
    replayed = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["status"]) for r in replayed["results"]] == [
        (r["id"], r["status"]) for r in recorded["results"]]


HOST = "node-prod-17"


def test_redact_hostnames_leaves_no_byte_of_the_name_or_its_addresses(
        fake_root: FakeRoot, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = build_a2(fake_root)
    fake_root.file("/etc/hostname", f"{HOST}.corp.example.com\n")
    log_dir = f"/var/log/{HOST}/ascend"  # the host name in every path below it
    fake_root.file(f"{log_dir}/debug/plog/plog-1_20250101120000000.log",
                   f"[INFO] {HOST}_worker0 rank 0 at 010.020.030.040:29500\n"
                   f"[INFO] peer ip-10-20-30-41.ec2.internal and NODE-PROD-17 again\n"
                   f"[INFO] pod vllm-deploy-7d9f8b6c4d-x2k9p joined, addr 10.20.30.42\n")
    fake_root.file(f"/var/log/{HOST}/ascend/run/device-0/device-7_20250101120000000.log",
                   f"{HOST} device log\n")
    rec_dir = f"/srv/rec-{HOST}"
    db = fake_root.path / rec_dir.lstrip("/") / f"{HOST}-20250101T120000Z.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('hostname', ?)", (HOST,))
        conn.execute("INSERT INTO meta VALUES ('peer', '10.20.30.40')")
    conn.close()
    env = dict(base.env) | {"ASCEND_PROCESS_LOG_PATH": log_dir, "HCCL_IF_IP": "10.20.30.40",
                            "ASCEND_CONSOLE_RECORDINGS": rec_dir, "HOSTNAME": HOST}
    host = LiveHost(root=base.root, env=env, python=base.python)
    out = tmp_path / "h.tar.gz"
    assert bundle(fake_root, host, out, "--redact-hostnames") == 0
    summary = capsys.readouterr().out
    raw = gzip.decompress(out.read_bytes())
    for value in (HOST, HOST.upper(), "10.20.30.40", "010.020.030.040", "10-20-30-41",
                  "10.20.30.41", "10.20.30.42", "7d9f8b6c4d-x2k9p", "corp.example.com"):
        assert value.encode() not in raw, value
    found = members(out)
    index = json.loads(found["bundle.json"])
    assert all(HOST not in json.dumps(entry) for entry in index["plog"])
    assert any(m.startswith("metrics/host-") for m in found)
    assert "host-1 = " in summary  # the mapping is shown here, and only here
    # replay works on the redacted paths: the log directory's disk is found under its new name
    capsys.readouterr()
    from checks.cli import main

    main(["--from", str(out), "--json"])
    replayed = json.loads(capsys.readouterr().out)
    recorded = json.loads(found["report.json"])
    assert [(r["id"], r["status"]) for r in replayed["results"]] == [
        (r["id"], r["status"]) for r in recorded["results"]]
