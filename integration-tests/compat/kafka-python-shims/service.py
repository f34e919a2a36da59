"""Written for Weir's compatibility matrix, not part of kafka-python.

kafka-python's test/integration/fixtures.py imports ExternalService and
SpawnedService from test/service.py, which its 2.3.0 sdist leaves out. With
KAFKA_URI set the fixtures only use ExternalService (a broker someone else
runs: here Weir, started by integration-tests/compat/run.py), so this module
provides that and a SpawnedService that refuses to spawn a broker."""


class ExternalService(object):
    """A broker already running at host:port; start/stop do nothing."""

    def __init__(self, host, port):
        self.host = host
        self.port = port

    def open(self):
        pass

    def start(self):
        pass

    def stop(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService(object):
    """Spawning Kafka/ZooKeeper is not supported here: set KAFKA_URI."""

    def __init__(self, args=None, env=None):
        raise RuntimeError("the Weir compat run uses an external broker: set KAFKA_URI")
