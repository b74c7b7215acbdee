"""Run a plan of :class:`~cellgraph.experiment.reproduce.Job`: ``cellgraph`` commands in subprocesses, up
to ``workers`` jobs at once, each after the jobs it needs.

A job whose marker file exists is skipped (its records copied if the runner that ran it was
killed before it copied them) and a started run resumes, so re-running a killed plan continues
it. Every command's output goes to ``ROOT/logs/<job>.log``; its user + system
CPU time (of the child alone, :func:`os.wait4`), wall time and exit status are appended to
``ROOT/commands.tsv``. A finished job's records (never checkpoints) are copied to the records
folder. Each job runs under a lock in ``ROOT/locks``: a second runner on the same root leaves
the jobs the first one holds (and those that need them) and takes the others, so a plan gains
workers by starting another runner.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cellgraph.errors import CellGraphError
from cellgraph.experiment.reproduce import Job
from cellgraph.experiment.runlog import RunLog
from cellgraph.experiment.runs import copy_record
from cellgraph.files import exclusive

__all__ = ["Runner", "collect", "status"]

COMMANDS_HEADER = "job\tcommand\tcpu_s\twall_s\texit\n"


def status(job: Job) -> str:
    """``done``, ``started`` (a folder without its marker; a run says how far it got:
    ``started: 2 of 3 epochs``) or ``to do``."""
    if job.done():
        return "done"
    if not job.started():
        return "to do"
    if job.resume is None:  # a search (its log counts its trials)
        return "started"
    run = RunLog.load(job.folder)
    return f"started: {len(run.metrics)} of {run.config['epochs']} epochs"


def collect(job: Job, records: Path, log: Path) -> Path:
    """Copy ``job``'s records to ``records/<job.record>``: a run's record
    (:func:`~cellgraph.experiment.runs.copy_record`) or a search's ``best.toml``, and the job's
    log (its commands and their output; a search's, every trial)."""
    dest = records / job.record
    if job.resume is not None:
        copy_record(job.folder, dest)
    dest.mkdir(parents=True, exist_ok=True)
    for path in (job.folder / "best.toml", log):
        if path.is_file():
            shutil.copy2(path, dest / path.name)
    return dest


class _Left:
    """How many jobs of each experiment are still to run here; calls ``settled(experiment)``
    when that reaches 0."""

    def __init__(self, pending: list[Job], settled: Callable[[str], None]) -> None:
        self.counts = Counter(job.experiment for job in pending)
        self.settled = settled

    def settle(self, job: Job) -> None:
        self.counts[job.experiment] -= 1
        self.check(job.experiment)

    def check(self, experiment: str) -> None:
        if self.counts[experiment] == 0:
            self.settled(experiment)


@dataclass
class Runner:
    """Runs ``jobs`` under ``root`` with ``workers`` at once (see the module docstring);
    ``echo`` receives one line per event (start, end, failure); ``program`` is what runs a
    command's arguments (``cellgraph`` in this interpreter)."""

    root: Path
    records: Path
    workers: int = 1
    echo: Callable[[str], None] = print
    program: tuple[str, ...] = (sys.executable, "-m", "cellgraph")
    #: called with an experiment's name once none of its jobs is left to run here (at the
    #: start for an experiment that is done), e.g. to write its table while the plan goes on
    settled: Callable[[str], None] = lambda experiment: None
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, jobs: list[Job]) -> list[str]:
        """Run every job not yet done; return the names of those that failed or could not
        start because a job they need failed. Ctrl-C stops the running commands (each saves
        its state) and re-raises."""
        done = {job.name for job in jobs if job.done()}
        for job in jobs:  # ended while a runner that was killed before copying its records ran it
            if job.name in done and not (self.records / job.record).is_dir():
                self.echo(f"done {job.name}, its records copied now -> {collect(job, self.records, self._log(job))}")
        pending = [job for job in jobs if job.name not in done]
        names = {job.name for job in jobs}
        failed: list[str] = []
        elsewhere: set[str] = set()  # held by another runner of the same root
        running: dict[Future, Job] = {}
        left = _Left(pending, self.settled)
        for experiment in dict.fromkeys(job.experiment for job in jobs):
            left.check(experiment)
        with ThreadPoolExecutor(max(self.workers, 1)) as pool:
            try:
                while pending or running:
                    for job in list(pending):
                        blocked = [n for n in job.needs if n in failed or n not in names]
                        if blocked:
                            pending.remove(job)
                            failed.append(job.name)
                            self.echo(f"skip {job.name}: needs {', '.join(blocked)}, which failed or is "
                                      "not in the plan")
                            left.settle(job)
                        elif elsewhere & set(job.needs):
                            pending.remove(job)
                            elsewhere.add(job.name)
                            self.echo(f"leave {job.name}: it needs {', '.join(elsewhere & set(job.needs))}, "
                                      "which another runner runs")
                            left.settle(job)
                        elif len(running) < self.workers and all(n in done for n in job.needs):
                            pending.remove(job)
                            running[pool.submit(self._job, job)] = job
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        job, result = running.pop(future), future.result()
                        (elsewhere.add if result is None else done.add if result else failed.append)(job.name)
                        left.settle(job)
            except KeyboardInterrupt:
                self.interrupt()
                raise
        return failed

    def interrupt(self) -> None:
        """Ctrl-C reaches the children on a terminal; from ``kill`` (SIGINT or SIGTERM) only
        this process gets it: pass it on as SIGTERM, which every command takes as Ctrl-C
        (:func:`cellgraph.cli.main.main`) and which, unlike SIGINT, the commands of a runner
        started in the background do not ignore; then let each command save and exit."""
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def _job(self, job: Job) -> bool | None:
        """Run ``job`` under its lock (``ROOT/locks``): True when it is done, False when it
        failed or was stopped, None when another runner of the same root holds it (so that
        several ``cellgraph reproduce`` processes can share a plan)."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with ExitStack() as held:
            try:
                held.enter_context(exclusive(locks / f"{job.name.replace('/', '-')}.lock", f"job {job.name}",
                                             "another cellgraph reproduce runs it"))
            except CellGraphError as err:
                self.echo(f"leave {job.name}: {err}")
                return None
            return self._commands(job)

    def _log(self, job: Job) -> Path:
        return self.root / "logs" / f"{job.name.replace('/', '-')}.log"

    def _commands(self, job: Job) -> bool:
        log = self._log(job)
        log.parent.mkdir(parents=True, exist_ok=True)
        if job.done():  # finished by another runner since the plan was read
            self.echo(f"done {job.name} (by another runner) -> {collect(job, self.records, log)}")
            return True
        for argv in job.commands():
            self.echo(f"start {job.name}: cellgraph {shlex.join(argv)}")
            code, cpu, wall = self._command(job.name, argv, log)
            self._account(job.name, argv, cpu, wall, code)
            if code in (130, -signal.SIGINT, -signal.SIGTERM):
                self.echo(f"stopped {job.name}: interrupted (it resumes when the plan runs again)")
                return False
            if code != 0:
                self.echo(f"FAILED {job.name} (exit {code}): see {log}{self._stopped_record(job, log)}")
                return False
        if not job.done():
            self.echo(f"FAILED {job.name}: its commands ended without {job.marker.name}; see {log}")
            return False
        self.echo(f"done {job.name} -> {collect(job, self.records, log)}")
        return True

    def _stopped_record(self, job: Job, log: Path) -> str:
        """A failed run's record (its metrics say how it stopped, e.g. a diverged loss) is kept
        like a finished one's; the note for the failure line."""
        if job.resume is None or not (job.folder / "config.json").is_file():
            return ""
        return f"; its record so far -> {collect(job, self.records, log)}"

    def _command(self, name: str, argv: tuple[str, ...], log: Path) -> tuple[int, float, float]:
        start = time.perf_counter()
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"$ cellgraph {shlex.join(argv)}\n")
            out.flush()
            proc = subprocess.Popen([*self.program, *argv], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            with self._lock:
                self._procs[name] = proc
            _, wait_status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(wait_status)
            with self._lock:
                del self._procs[name]
        return proc.returncode, usage.ru_utime + usage.ru_stime, time.perf_counter() - start

    def _account(self, name: str, argv: tuple[str, ...], cpu: float, wall: float, code: int) -> None:
        """One row of ``commands.tsv`` (in the root and, as a copy, in the records folder)."""
        with self._lock:
            for folder in (self.root, self.records):
                path = folder / "commands.tsv"
                folder.mkdir(parents=True, exist_ok=True)
                new = not path.exists()
                with open(path, "a", encoding="utf-8") as out:
                    out.write((COMMANDS_HEADER if new else "")
                              + f"{name}\tcellgraph {shlex.join(argv)}\t{cpu:.0f}\t{wall:.0f}\t{code}\n")
