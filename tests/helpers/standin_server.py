"""A stand-in server process for lifecycle tests (not vLLM, and not pretending to be).

It answers /health after --delay seconds, spawns a grandchild process so that
the server is a process tree like vLLM's (API server + engine core), and can
ignore SIGTERM to force the SIGKILL escalation. To stand for an engine that dies while
its front lives on (TP workers hung on two GPUs): --fatal-after prints a fatal line and
never becomes healthy; --engine-title names its child (argv[0]) and --child-dies-after
kills that child; --helper-lives makes the child fork a short-lived helper under its title.
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
parser.add_argument("--fatal-after", type=float, default=None)
parser.add_argument("--engine-title", default=None)
parser.add_argument("--child-dies-after", type=float, default=None)
parser.add_argument("--detached-child", action="store_true", help="the child leaves the process group")
parser.add_argument("--helper-lives", type=float, default=None,
                    help="the child forks a helper that keeps its title and exits after this long")
args = parser.parse_args()

if args.ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
engine = "import time; time.sleep(600)" if args.helper_lives is None else \
    f"import os, time\nif os.fork() == 0:\n    time.sleep({args.helper_lives}); os._exit(0)\ntime.sleep(600)"
child = subprocess.Popen([args.engine_title or sys.executable, "-c", engine],
                         executable=sys.executable, start_new_session=args.detached_child)
print(f"standin: child pid {child.pid}", flush=True)
start = time.monotonic()
fatal_said = child_killed = False


def dead_engine() -> bool:
    """Say the fatal line / kill the child when due; True once the engine is dead."""
    global fatal_said, child_killed
    now = time.monotonic() - start
    if args.fatal_after is not None and now >= args.fatal_after and not fatal_said:
        print("(EngineCore pid=1) ERROR 11-26 07:39:51 [core.py:1] RuntimeError: Worker failed", flush=True)
        fatal_said = True
    if args.child_dies_after is not None and now >= args.child_dies_after and not child_killed:
        child.kill()
        child.wait()
        child_killed = True
    return fatal_said or child_killed


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready = time.monotonic() - start >= args.delay and not dead_engine()
        self.send_response(200 if ready else 503)
        self.end_headers()

    def log_message(self, *a):
        pass


server = http.server.HTTPServer(("127.0.0.1", args.port), Health)
server.timeout = 0.1
while args.exit_after is None or time.monotonic() - start < args.exit_after:
    server.handle_request()
    dead_engine()
print("standin: exiting with code 3", flush=True)
sys.exit(3)
