"""The target: whose deployment a run judges.

A serving process (`--pid`, or discovered from the npu-smi process table and known server
command lines), an environment file (`--env-file`), or, when there is neither, this shell.

find.py       the front door: find(spec) -> Observed (host, target, npu-smi reading), one
              TargetError for every way a target cannot be found or read
model.py      the Target and its ServingArgs, and their JSON form
parts.py      what only a process target has (ProcessInfo, NpuUse, Candidate, Sourced)
proc.py       reading /proc/PID: environ, cmdline, exe, status, namespaces
cmdline.py    which known server a command line runs, how it reads, secrets masked
serving.py    what a vLLM command line (and MindIE's config.json) says it serves
jsonpath.py   one reader of a dotted path into their JSON (`a.b[0]`, `#count`)
discovery.py  the processes on the NPUs and the known servers, grouped, first one chosen
envfile.py    --env-file: systemd EnvironmentFile, `docker inspect` JSON, KEY=VALUE lines
host.py       TargetHost: the machine as the target sees it (its environment, its files,
              its packages read statically); programs are still this machine's
"""
