"""A RabbitMQ cluster of a test's own: nodes on one machine, started, killed and stopped by scripts/services.sh.

The shared RabbitMQ of scripts/services.sh serves every other test, so a test
that kills a node makes its own cluster: services.sh with a scratch dir of the
test's own starts the nodes side by side (each its own node name, ports and
data dir; one Erlang cookie and epmd) and joins them to node 1. remove() stops
every node, also after a failed test, and deletes the dir.
"""

import os
import shutil
import subprocess
import tempfile

from proton.utils import BlockingConnection

from harness import require_env


class Node:
    """One node as harness.Consumer sees a broker: PLAIN as the services' test user; addresses as written."""

    profile = "rabbitmq"
    user = "outboxd"
    password = "outboxd-secret"

    def __init__(self, url):
        self.url = url
        self.name = url.partition("//")[2]  # host:port, as outboxd names the node

    def address(self, destination):
        return destination

    def connect(self, timeout=10):
        return BlockingConnection(self.name, timeout=timeout, user=self.user, password=self.password,
                                  allowed_mechs="PLAIN")


class RabbitCluster:
    def __init__(self, nodes=3):
        self.script = require_env("OUTBOXD_SERVICES_SH")
        self.count = nodes
        self.dir = tempfile.mkdtemp(prefix="outboxd-rabbit-cluster-")
        self.nodes = []  # Node, node 1 first

    def _services(self, *args, check=True):
        result = subprocess.run([self.script, *args], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, OUTBOXD_SCRATCH=self.dir))
        if check and result.returncode != 0:
            raise RuntimeError(f"services.sh {' '.join(args)} failed ({result.returncode}):\n"
                               f"{result.stdout}\n{result.stderr}")
        return result.stdout

    def start(self):
        self.start_output = self._services("start-rabbitmq-cluster", str(self.count))
        with open(os.path.join(self.dir, "services.env")) as f:
            for line in f:
                if line.startswith("export OUTBOXD_TEST_RABBITMQ_CLUSTER_URLS="):
                    self.nodes = [Node(url) for url in line.split("=", 1)[1].strip().strip("'").split()]
        assert len(self.nodes) == self.count, self.start_output
        return self

    @property
    def urls(self):
        return [node.url for node in self.nodes]

    def rabbitmqctl(self, index, *args):
        """rabbitmqctl against node `index` (0-based, as in urls)."""
        return self._services("rabbitmqctl-node", str(index + 1), *args)

    def declare_quorum_queue(self, name, index=0):
        """A quorum queue on every node, its leader on node `index`. RabbitMQ 3.10's AMQP 1.0 plugin
        cannot pass x-queue-type, so the node declares it itself."""
        args = '[{<<"x-queue-type">>, longstr, <<"quorum">>}]'
        declared = self.rabbitmqctl(index, "eval", f'rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, '
                                                   f'<<"{name}">>), true, false, {args}, none, <<"outboxd-test">>).')
        assert declared.startswith("{new,"), declared

    def kill(self, index):
        """kill -9 of node `index` (0-based)."""
        self._services("kill-rabbitmq-node", str(index + 1))

    def index_of(self, name):
        return [node.name for node in self.nodes].index(name)

    def remove(self):
        try:
            self._services("stop", check=False)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
