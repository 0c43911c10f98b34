"""The jobs folder: one `.properties` file per job, read by every DAG file, the job page and its API.

One file that does not load (not UTF-8, a line that is not key=value, a bad value, no `job.name`), or two that
claim one `job.name`, must not take the other jobs down with it: the folder's reading keeps every job that
loads and reports each file it left out, by file and by what is wrong in it. Two files with one name both
stay out: running either one would be a guess about which one the user meant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elasticity.config.errors import ConfigError
from elasticity.config.job import validate
from elasticity.config.properties import read_properties


@dataclass(frozen=True)
class JobFiles:
    jobs: dict[str, Path]  # job.name -> its file, for every file that loads and names a job no other file names
    problems: tuple[str, ...]  # one line per file left out: the file and why

    def error(self) -> ConfigError | None:
        """The problems as one error (what the jobs folder's check raises), or None."""
        if not self.problems:
            return None
        return ConfigError(f"{len(self.problems)} job config file(s) left out:\n  " + "\n  ".join(self.problems))


def read_job_file(path: Path) -> str:
    """The job's name; a ConfigError naming the file and what is wrong in it."""
    props = read_properties(path)
    try:
        return validate(props, warn_unknown=False).job_name
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e


def read_jobs_folder(folder: Path) -> JobFiles:
    claimed: dict[str, list[Path]] = {}
    problems = []
    for path in sorted(folder.glob("*.properties")):
        try:
            claimed.setdefault(read_job_file(path), []).append(path)
        except ConfigError as e:
            problems.append(str(e).replace("\n", " "))
    jobs = {}
    for name, paths in claimed.items():
        if len(paths) == 1:
            jobs[name] = paths[0]
        else:
            problems.append(f"job.name={name} is claimed by {', '.join(str(p) for p in paths)}: give each job its own name")
    return JobFiles(jobs, tuple(problems))
