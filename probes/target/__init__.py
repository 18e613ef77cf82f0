"""The target: whose deployment a run judges.

A serving process (`--pid`, or discovered from the npu-smi process table and known server
command lines), an environment file (`--env-file`), or, when there is neither, this shell.

model.py      the frozen facts (Target, ProcessInfo, ServingArgs) and their JSON form
proc.py       reading /proc/PID: environ, cmdline, exe, status, namespaces
serving.py    what a vLLM / MindIE / torchrun command line (and MindIE's config.json) says
discovery.py  the processes on the NPUs and the known servers, grouped, first one chosen
envfile.py    --env-file: systemd EnvironmentFile, `docker inspect` JSON, KEY=VALUE lines
host.py       TargetHost: the machine as the target sees it (its environment, its files,
              its packages read statically); programs are still this machine's
"""
