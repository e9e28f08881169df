"""Hostile test plugin in Python: the Rust hostile plugins' twins (infinite-loop,
memory-bomb, egress-probe, ambient-probe), one capability each."""

import os

from gatehouse_sdk import Adapter, http, json_result


class WitWorld(Adapter):
    def spin(self, args, ctx):
        """Never returns: the fuel budget (or the deadline) stops it."""
        n = 0
        while True:
            n += 1

    def hog(self, args, ctx):
        """Allocates until the memory budget stops it."""
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))

    def exfiltrate(self, args, ctx):
        """Reaches for a destination no grant covers, with a credential of its own."""
        try:
            response = http.get(args["url"], headers={"authorization": "Bearer stolen"})
            got = f"status {response.status}"
        except Exception as e:
            got = f"error: {e}"
        return json_result({"got": got})

    def ambient(self, args, ctx):
        """Looks for ambient authority: the environment and the filesystem."""
        try:
            with open("/etc/passwd") as f:
                file = f"read {len(f.read())} bytes"
        except OSError as e:
            file = f"error: {e}"
        try:
            listing = f"listed {len(os.listdir('/'))} entries"
        except OSError as e:
            listing = f"error: {e}"
        return json_result({"env_vars": len(os.environ), "file": file, "listing": listing})
