"""A stand-in server process for lifecycle tests (not vLLM, and not pretending to be).

It answers /health after --delay seconds, spawns a grandchild process so that
the server is a process tree like vLLM's (API server + engine core), and can
ignore SIGTERM to force the SIGKILL escalation.
"""
import argparse
import http.server
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--ignore-sigterm", action="store_true")
parser.add_argument("--exit-after", type=float, default=None)
args = parser.parse_args()

if args.ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(f"standin: child pid {child.pid}", flush=True)
start = time.monotonic()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready = time.monotonic() - start >= args.delay
        self.send_response(200 if ready else 503)
        self.end_headers()

    def log_message(self, *a):
        pass


server = http.server.HTTPServer(("127.0.0.1", args.port), Health)
server.timeout = 0.1
while args.exit_after is None or time.monotonic() - start < args.exit_after:
    server.handle_request()
print("standin: exiting with code 3", flush=True)
sys.exit(3)
