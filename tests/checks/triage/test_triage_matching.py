"""Matching and ranking: signatures, error codes by shape, correlation rules, order."""

from __future__ import annotations

from pathlib import Path

from checks.triage import triage_paths, triage_text
from checks.triage.literals import required_literals
from checks.triage.matching import Matcher, Tally, scan_block
from checks.triage.model import Limits
from checks.triage.ranking import CodeBook, rank
from checks.triage.rows import ErrorCode, Signature

SRC = ("https://example.invalid/doc",)


def ids(text: str) -> list[str]:
    return [f.id for f in triage_text(text).findings]


def test_error_codes_of_every_documented_shape_are_recognised() -> None:
    report = triage_text("\n".join((
        "[ERROR] RUNTIME(1,python):2026-12-07-10:00:00 stream sync failed, ret=507001",
        "EZ1001: [PID: 3] Parameter validation failed.",
        "call aclnnAdd failed, error code is 561003",
        "aclrtMalloc failed: ACL_ERROR_RT_MEMORY_ALLOCATION",
        "EI0006: Getting socket time-out is not this signature's wording",
    )))
    by_id = {f.id: f for f in report.findings}
    assert by_id["507001"].cause.startswith("507001 ACL_ERROR_RT_TS_ERROR")
    assert by_id["EZ1001"].component == "operators (aclnn)"
    assert "operator binary package" in by_id["561003"].cause
    assert by_id["207001"].playbook == "symptom.memory-above-plan"
    # EI0006 is the code the HCCL socket-timeout signature explains: it makes that finding
    assert by_id["hccl.socket-timeout"].playbook == "symptom.hccl-settings"
    assert "EI0006" not in by_id
    assert by_id["hccl.socket-timeout"].count == 1  # its pattern and its code: one line


def test_a_code_not_in_the_data_says_so_with_its_component() -> None:
    report = triage_text("EL7777: something\nerror code is 507777\nEQ1234 x\nret=999999\n")
    causes = {f.id: f.cause for f in report.findings}
    assert causes["EL7777"].startswith("code EL7777 from Driver, not in our data")
    assert causes["507777"].startswith("code 507777 from runtime")
    assert causes["EQ1234"].startswith("code EQ1234 from an unknown component, not in our data")
    assert causes["999999"].startswith("code 999999 from an unknown component")
    assert not any(f.known for f in report.findings)


def test_mindie_codes_are_recognised_by_their_component() -> None:
    # no error word on these lines: the codes alone make them candidates
    report = triage_text("MIE05E040000 config check\n[INFO] MIE04E13030A backend\n")
    by_id = {f.id: f for f in report.findings}
    assert by_id["MIE05E040000"].known and "npuDeviceIds" in by_id["MIE05E040000"].fix
    assert by_id["MIE04E13030A"].cause.startswith("code MIE04E13030A from MindIE Server, not in")


def test_negative_controls_hold_no_codes() -> None:
    assert ids("address 0xE10035 mapped\nvalue=FEE12345\nline 507035 of the file\n"
               "E10035X is an id\nthroughput 507035 tokens\n") == []
    assert ids("HCCL init ok, socket connected in 3 s\nno out of memory seen\n") == []
    assert ids("status: 100000 tokens\nresult: 200000 rows\nXMIE04E13030A\n") == []


def test_a_signature_absorbs_the_codes_it_explains() -> None:
    # one AI Core fault: the vector core's code makes its finding, which refines the general
    # AI Core error line, so the log gives one finding, not two
    report = triage_text("[ERROR] there is an aivec error exception, core id is 3\n"
                         "[ERROR] stream sync failed, ret=507035\n"
                         "[ERROR] synchronize stream failed, ret=507035\n")
    assert [f.id for f in report.findings] == ["runtime.vector-core-exception"]
    finding = report.findings[0]
    assert finding.count == 3  # the AI Core line once, the code twice
    assert [e.line for e in finding.evidence] == [1, 2, 3]
    assert finding.cause.startswith("Error code 507035 (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION).")


def test_an_ai_core_error_without_the_vector_code_stays_general() -> None:
    report = triage_text("[ERROR] there is an exception of aicore error, core id is 3\n"
                         "[ERROR] stream sync failed, ret=507015\n")
    assert [f.id for f in report.findings] == ["core.aicore-error"]
    assert report.findings[0].cause.startswith("Error code 507015 (ACL_ERROR_RT_AICORE_EXCEPTION).")


def test_a_generic_code_alone_stays_a_finding_of_the_code() -> None:
    # EZ1001 (aclnn parameter validation) is shared by the kernel-missing rows: alone it names
    # none of them; with the opType/socVersion line it joins the more specific one
    assert ids("EZ1001: [PID: 3] Parameter validation failed.\n") == ["EZ1001"]
    soc = ("EZ1001: [PID: 3] binary_info_config.json of socVersion [ascend310p] does not "
           "support opType [MoeGatingTopKSoftmax].\n")
    assert ids(soc) == ["cann.optype-not-on-soc"]


def test_causes_rank_above_consequences_and_repeats_merge() -> None:
    log = "\n".join((
        "INFO 12-07 10:00:00 [core.py:1] starting",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: Engine core initialization failed. See root cause above. {}",
    ))
    report = triage_text(log)
    assert [f.id for f in report.findings] == [
        "torch-npu.out-of-memory", "core.python-traceback", "vllm.engine-core-init-failed"]
    oom = report.findings[0]
    assert oom.count == 2 and [e.line for e in oom.evidence] == [4, 5]
    assert oom.context[0].startswith("Traceback") and len(oom.context) == 4


def test_the_earliest_cause_comes_first() -> None:
    report = triage_text("EZ1001: bad argument\nlater: getting socket times out\n")
    assert [f.id for f in report.findings] == ["EZ1001", "hccl.socket-timeout"]


def _run(signatures: list[Signature], text: str) -> list[str]:
    book = CodeBook.of([ErrorCode("EZ", "family", "operators", "op codes", "x", SRC)])
    matcher = Matcher.build(signatures, book.names())
    tally = Tally(Limits())
    scan_block(matcher, tally, text.encode(), 0, "t", 1)
    return [f.id for f in rank(matcher, book, tally)]


def _sig(sig_id: str, pattern: str, **extra: object) -> Signature:
    return Signature(id=sig_id, title=sig_id, component="c", patterns=(pattern,),
                     meaning="m", causes=(), first_steps=(), fix="f", playbook="p",
                     sources=SRC, **extra)  # type: ignore[arg-type]


def test_requires_any_combines_evidence_from_elsewhere_in_the_input() -> None:
    general = _sig("t.ez1001", r"EZ1001", codes=("EZ1001",))
    specific = _sig("t.ez1001-310p", r"EZ1001", requires_any=(r"\b310P\d?\b",),
                    refines=("t.ez1001",), codes=("EZ1001",), weight=90)
    alone = "EZ1001: validation failed\n"
    assert _run([general, specific], alone) == ["t.ez1001"]
    combined = "chip Ascend310P3 detected\nEZ1001: validation failed\n"
    assert _run([general, specific], combined) == ["t.ez1001"]  # 310P3 is not a word 310P3
    combined = "npu-smi: Name 310P3\nEZ1001: validation failed\n"
    assert _run([general, specific], combined) == ["t.ez1001-310p"]


def test_a_signature_named_by_its_code_alone_is_found() -> None:
    coded = _sig("t.coded", r"never in this log", codes=("EZ4321",))
    assert _run([coded], "EZ4321: failed\n") == ["t.coded"]


def test_patterns_without_a_literal_still_match() -> None:
    loose = _sig("t.loose", r"\d{3}-\d{3}")
    assert required_literals(loose.patterns[0]) is None
    assert _run([loose], "a\nid 123-456 here\n") == ["t.loose"]


def test_required_literals_are_in_every_match() -> None:
    cases = {
        r"there is an? \S+ (?:aicore|aivec) error": "there is an xx aicore error",
        r"HCCL.*timeout": "HCCL op timeout",
        r"(?:foo|barbaz) x": "BarBaz x",
        r"显存不足": "显存不足",
    }
    for pattern, sample in cases.items():
        literals = required_literals(pattern)
        assert literals, pattern
        assert any(w in sample.lower().encode() for w in literals), pattern


def test_chinese_lines_match() -> None:
    chinese = _sig("t.zh", r"显存不足")
    assert _run([chinese], "错误：显存不足，请减小批大小\n") == ["t.zh"]


def test_across_files_the_earliest_time_ranks_first(tmp_path: Path) -> None:
    service = tmp_path / "service.log"
    service.write_text("[ERROR] 2026-12-07 09:14:09 RuntimeError: NPU out of memory. Tried to "
                       "allocate 2.00 GiB\n")
    plog = tmp_path / "plog-1_1.log"
    plog.write_text("[ERROR] RUNTIME(1,python):2026-12-07-09:14:07.120.008 there is an aivec "
                    "error\n")
    ranked = [f.id for f in triage_paths([service, plog]).findings]
    assert ranked == ["core.aicore-error", "torch-npu.out-of-memory"]
    service.write_text("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n")
    ranked = [f.id for f in triage_paths([service, plog]).findings]
    assert ranked == ["torch-npu.out-of-memory", "core.aicore-error"]  # no time: read order


def test_a_more_specific_reading_absorbs_the_general_one() -> None:
    # same failure, two rows: the specific row answers and the general one joins it
    assert ids("ImportError: /usr/lib/torch_npu/lib/libtorch_npu.so: undefined symbol: "
               "MsprofSysCycleTime\n") == ["torch-npu.cann-symbol-missing"]
    assert ids("ImportError: /usr/lib/torch_npu/lib/libtorch_npu.so: undefined symbol: "
               "_ZN3c107Warning\n") == ["torch-npu.undefined-symbol"]
    assert ids("triton.compiler.errors.MLIRCompilationError:\n"
               "bishengir-compile: for the --target option: Cannot find option named "
               "'Ascend310P3'!\n") == ["triton.bishengir-target-unknown"]
    # a chain: MTE out of range refines the vector core exception, which refines the AI Core error
    report = triage_text(
        "The error from device(chipId:5, dieId:0), there is an exception of aivec error, core id\n"
        "errorStr: The DDR address of the MTE instruction is out of range.\n"
        "RuntimeError: ACL stream synchronize failed, error code:507035\n")
    assert [f.id for f in report.findings] == ["hccl.mte-out-of-range"]
    assert report.findings[0].count == 3


def test_the_prefilter_skips_words_every_line_of_the_input_carries() -> None:
    # a vLLM V1 engine log: "EngineCore" and "model" on every line must not make every line a
    # candidate; each pattern is searched by the literal rarest in this input
    from checks.triage.engine import knowledge

    matcher, _ = knowledge()
    ordinary = ("(EngineCore_DP0 pid=7) INFO 12-07 10:00:00 [model_runner.py:1] call model "
                "aclrtMallocAlign32 ok, AllReduce done\n").lower().encode() * 2000
    plain, _ = matcher.prefilters(ordinary)
    assert plain.search(ordinary) is None
    failed = b"(enginecore_dp0 pid=7) error enginecore failed to start\n"
    assert plain.search(failed) is not None
    assert ids(ordinary.decode() + failed.decode()) == ["vllm.engine-core-init-failed"]
