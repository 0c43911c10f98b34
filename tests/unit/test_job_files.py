"""The jobs folder: a file that does not load, or two that claim one job.name, are left out and reported by file;
every other job is kept."""

from elasticity.config.job_files import read_jobs_folder

GOOD = "job.name={name}\ntask.inputs=kafka.orders\njob.elasticity.factor={factor}\n"


def test_bad_files_are_left_out_by_name_and_the_others_kept(tmp_path):
    (tmp_path / "a.properties").write_text(GOOD.format(name="orders", factor=2))
    (tmp_path / "b.properties").write_text(GOOD.format(name="clicks", factor=4))
    (tmp_path / "latin1.properties").write_bytes("job.name=caf\xe9\n".encode("latin-1"))
    (tmp_path / "typo.properties").write_text(GOOD.format(name="typo", factor="zwei"))
    (tmp_path / "noline.properties").write_text(GOOD.format(name="noline", factor=2) + "=orphan\n")
    (tmp_path / "twin-1.properties").write_text(GOOD.format(name="twin", factor=2))
    (tmp_path / "twin-2.properties").write_text(GOOD.format(name="twin", factor=3))
    (tmp_path / "notes.txt").write_bytes(b"\xff")  # not a job config

    found = read_jobs_folder(tmp_path)
    assert found.jobs == {"orders": tmp_path / "a.properties", "clicks": tmp_path / "b.properties"}
    problems = "\n".join(found.problems)
    assert len(found.problems) == 4, problems
    assert f"{tmp_path / 'latin1.properties'}: not UTF-8 text (byte 12: b'\\xe9')" in problems
    assert f"{tmp_path / 'typo.properties'}: invalid job config:" in problems and "job.elasticity.factor" in problems
    assert f"{tmp_path / 'noline.properties'}: line '=orphan' is not key=value" in problems
    assert f"job.name=twin is claimed by {tmp_path / 'twin-1.properties'}, {tmp_path / 'twin-2.properties'}" in problems
    error = found.error()
    assert error is not None and str(error).startswith("4 job config file(s) left out:")


def test_a_good_folder_has_no_error(tmp_path):
    (tmp_path / "a.properties").write_text(GOOD.format(name="orders", factor=2))
    assert read_jobs_folder(tmp_path).error() is None
