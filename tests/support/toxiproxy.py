"""A Toxiproxy server of the test's own, driven through its HTTP API: proxies between outboxd and a service, toxics on them.

The server binary comes from OUTBOXD_TEST_TOXIPROXY (scripts/setup.sh builds it,
scripts/services.sh exports its path); without it the test is skipped, or fails
under OUTBOXD_REQUIRE_SERVICES=1.
"""

import json
import os
import subprocess
import urllib.request

from harness import _started, free_port, require_env, wait_until

STREAMS = ("upstream", "downstream")  # client to service, service to client


class Toxiproxy:
    def __init__(self, workdir):
        binary = require_env("OUTBOXD_TEST_TOXIPROXY", "run scripts/setup.sh, which builds Toxiproxy, then start "
                             "scripts/services.sh and source its env file")
        if not os.access(binary, os.X_OK):
            raise AssertionError(f"OUTBOXD_TEST_TOXIPROXY={binary} is not an executable: run scripts/setup.sh")
        self.port = free_port()
        self.log_path = os.path.join(workdir, "toxiproxy.log")
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen([binary, "-host", "127.0.0.1", "-port", str(self.port)],
                                            stdout=log, stderr=log)
        _started.append(self.process)
        wait_until(self._answers, timeout=10, what="toxiproxy's API answering")

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None

    def _answers(self):
        try:
            return self._call("GET", "/version") is not None
        except OSError:
            return False

    def proxy(self, name, upstream_port):
        """A proxy to 127.0.0.1:upstream_port; returns the port it listens on."""
        port = free_port()
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}",
                                        "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        return port

    def add(self, proxy, toxic, **attributes):
        """Puts `toxic` on both directions of `proxy`, for every connection, open or new."""
        for stream in STREAMS:
            self._call("POST", f"/proxies/{proxy}/toxics", {"name": f"{toxic}_{stream}", "type": toxic,
                                                            "stream": stream, "attributes": attributes})

    def heal(self, proxy, toxic):
        for stream in STREAMS:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}_{stream}")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
