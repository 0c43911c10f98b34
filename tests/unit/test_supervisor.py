"""The local cluster's supervisor keeps supervising when a start fails, whatever the error says."""

from elasticity.config.services import DaemonState
from elasticity.local.cluster import LocalCluster
from elasticity.local.supervisor import Supervisor, SupervisorStatus, status_file


class MasterGoneMidStart(LocalCluster):
    """A start that ends with an error of no message (the master died while the driver started)."""

    def start(self, *args, **kwargs):
        raise AssertionError


def test_a_start_failing_with_an_error_of_no_message_is_recorded_and_tried_again_later(tmp_path):
    supervisor = Supervisor(MasterGoneMidStart(tmp_path), workers=1, cores=1, memory="1g")
    (supervisor.cluster.root / "supervisor").mkdir(parents=True)
    assert supervisor.check() == []  # nothing runs: every service is down, the start fails
    status = SupervisorStatus.read(status_file(supervisor.cluster))
    assert status is not None and status.failed_starts == 1
    assert {s.last_error for s in status.services.values()} == {"AssertionError"}
    assert supervisor.check() == []  # within the back-off: not tried again yet


class StartsWhatIsDown(LocalCluster):
    def start(self, *args, **kwargs):
        return None


def _state(pid: int) -> DaemonState:
    return DaemonState(pid=pid, port=1000 + pid, data_dir="d", log_file="l")


class Scripted(Supervisor):
    """The services' states as the check sees them, before and after its start."""

    def __init__(self, cluster, seen):
        super().__init__(cluster, workers=2, cores=1, memory="1g")
        self.seen = iter(seen)

    def states(self):
        return next(self.seen)


def test_a_service_that_dies_while_the_start_runs_is_counted_as_started_again(tmp_path):
    # worker-1 is down at the check; the Connect server, SIGKILLed a moment before, still looks alive, dies
    # while the start runs, and the start makes it a new process: both were started again
    before = {"master": _state(1), "worker-1": None, "spark-connect": _state(2)}
    after = {"master": _state(1), "worker-1": _state(3), "spark-connect": _state(4)}
    supervisor = Scripted(StartsWhatIsDown(tmp_path), [before, after])
    (supervisor.cluster.root / "supervisor").mkdir(parents=True)
    assert supervisor.check() == ["worker-1", "spark-connect"]
    status = SupervisorStatus.read(status_file(supervisor.cluster))
    assert status is not None and {n: s.restarts for n, s in status.services.items()} == {"worker-1": 1, "spark-connect": 1}
