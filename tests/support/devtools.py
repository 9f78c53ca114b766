"""Headless Debian Chromium driven over the DevTools protocol: navigate, evaluate, wait for loads, screenshots."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket  # Debian: python3-websocket


def chromium_binary():
    return shutil.which("chromium")


class Browser:
    """One Chromium process with one page. Log entries (CSP violations among them) are kept in `log`."""

    def __init__(self, width=1100, height=640):
        self.profile = tempfile.mkdtemp(prefix="outboxd-chromium-")
        # --no-sandbox: tests may run as root, where Chromium's sandbox refuses to start.
        self.process = subprocess.Popen(
            [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._debugging_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            page = next(t for t in json.load(response) if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events = []
        self.log = []
        self.call("Page.enable")
        self.call("Log.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _debugging_port(self, timeout=30):
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    first = f.readline().strip()
                if first:
                    return int(first)
            time.sleep(0.1)
        raise AssertionError("Chromium did not open its DevTools port")

    def _receive(self):
        message = json.loads(self.socket.recv())
        if message.get("method") == "Log.entryAdded":
            self.log.append(message["params"]["entry"])
        elif "method" in message:
            self.events.append(message)
        return message

    def call(self, method, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    def wait_for_load(self):
        while True:
            for event in self.events:
                if event["method"] == "Page.loadEventFired":
                    self.events.clear()
                    return
            self._receive()

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for_load()

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (DevTools evaluates it, the page's CSP aside)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def click(self, selector):
        """Clicks the element as a person would, and waits for the page it leads to."""
        self.events.clear()
        found = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                              f" if (!e) return false; e.click(); return true; }})()")
        assert found, f"nothing matches {selector}"
        self.wait_for_load()

    def text(self):
        return self.evaluate("document.body.innerText")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            self.process.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)
