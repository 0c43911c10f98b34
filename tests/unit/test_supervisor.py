"""The local cluster's supervisor keeps supervising when a start fails, whatever the error says."""

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
