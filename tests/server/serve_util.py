"""Helpers for the `roofline serve` Python test suites (stdlib only).

  start_server(binary, args)  -> Server: a `roofline serve --port 0 ARGS` subprocess, run from the
                                 repository root, ready (GET /health == 200) when returned.
  Server.stop()               -> SIGTERM, asserts exit code 0 within 30 s (kills it otherwise).
  raw_request(port, data)     -> RawResponse: bytes over a plain socket, the whole answer read back
                                 with deadlines (never hangs past its timeout).
  http_json(...)              -> (status, headers, parsed JSON or None, raw body) over http.client.
  metrics(port)               -> {sample name (with labels): value} from GET /metrics.
  binary_from_argv()          -> the roofline binary: sys.argv[1] (popped so that unittest does not
                                 see it), else $ROOFLINE_BIN, else build/cpu/tools/cli/roofline.
  sse_events(body)            -> the `data:` payloads of a server-sent-event body.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BINARY = os.path.join(REPO_ROOT, "build", "cpu", "tools", "cli", "roofline")
DEFAULT_MODEL = os.path.join(REPO_ROOT, ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"

_LISTEN_RE = re.compile(rb"roofline serve: listening on http://([^:\s]+):(\d+)")


def binary_from_argv(from_argv=True):
    """The roofline binary (absolute): argv[1] if given and from_argv (removed from sys.argv, so that
    unittest does not see it), else $ROOFLINE_BIN, else the default build path. Exits 2 when it
    does not exist. (Under `python -m unittest`, pass from_argv=False.)"""
    path = None
    if from_argv and len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        path = sys.argv.pop(1)
    path = path or os.environ.get("ROOFLINE_BIN") or DEFAULT_BINARY
    path = os.path.abspath(path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        sys.stderr.write("error: roofline binary not found or not executable: %s\n" % path)
        sys.exit(2)
    return path


class Server:
    """A running `roofline serve`. Attributes: base_url, host, port, proc, args, log()."""

    def __init__(self, proc, host, port, args, log_chunks, log_lock):
        self.proc = proc
        self.host = host
        self.port = port
        self.args = args
        self.base_url = "http://%s:%d" % (host, port)
        self._log_chunks = log_chunks
        self._log_lock = log_lock

    def log(self):
        """Everything the server wrote to stderr and stdout so far (decoded)."""
        with self._log_lock:
            return b"".join(self._log_chunks).decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self, timeout=30.0):
        """SIGTERM; asserts a clean exit (code 0, "roofline serve: stopped") within `timeout`."""
        if self.proc.poll() is not None:
            raise AssertionError("the server had already exited with code %s\n--- server log ---\n%s"
                                 % (self.proc.returncode, self.log()[-4000:]))
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the server did not exit within %.0f s of SIGTERM\n--- server log ---\n%s"
                                 % (timeout, self.log()[-4000:]))
        time.sleep(0.05)  # let the reader threads drain the pipes
        if code != 0:
            raise AssertionError("the server exited with code %d after SIGTERM\n--- server log ---\n%s"
                                 % (code, self.log()[-4000:]))
        if "roofline serve: stopped" not in self.log():
            raise AssertionError("the server exited 0 but never printed 'roofline serve: stopped'\n%s"
                                 % self.log()[-4000:])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.stop()
        else:
            self.kill()
        return False


def _pump(stream, chunks, lock, on_data):
    while True:
        data = stream.readline()
        if not data:
            break
        with lock:
            chunks.append(data)
        on_data()
    stream.close()


def start_server(binary, args=(), timeout=60.0, env=None):
    """Starts `binary serve --port 0 ARGS` from the repository root; returns a ready Server.
    Raises AssertionError (after killing the process) when it exits, prints no port, or does not
    answer GET /health with 200 within `timeout` seconds."""
    args = list(args)
    cmd = [binary, "serve", "--port", "0"] + args
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    chunks, lock = [], threading.Lock()
    seen = threading.Event()

    def log_text():
        with lock:
            return b"".join(chunks).decode("utf-8", "replace")

    def find_port():
        with lock:
            m = _LISTEN_RE.search(b"".join(chunks))
        return m

    for stream in (proc.stderr, proc.stdout):
        threading.Thread(target=_pump, args=(stream, chunks, lock, seen.set), daemon=True).start()

    deadline = time.monotonic() + timeout
    try:
        m = None
        while m is None:
            m = find_port()
            if m is not None:
                break
            if proc.poll() is not None:
                raise AssertionError("`%s` exited with code %d before listening:\n%s"
                                     % (" ".join(cmd), proc.returncode, log_text()[-4000:]))
            if time.monotonic() > deadline:
                raise AssertionError("`%s` printed no listening line within %.0f s:\n%s"
                                     % (" ".join(cmd), timeout, log_text()[-4000:]))
            seen.wait(0.1)
            seen.clear()
        host, port = m.group(1).decode(), int(m.group(2))
        last = None
        while True:
            if proc.poll() is not None:
                raise AssertionError("`%s` exited with code %d while loading:\n%s"
                                     % (" ".join(cmd), proc.returncode, log_text()[-4000:]))
            try:
                conn = http.client.HTTPConnection(host, port, timeout=5)
                conn.request("GET", "/health")
                resp = conn.getresponse()
                resp.read()
                conn.close()
                last = resp.status
                if resp.status == 200:
                    break
                if resp.status != 503:
                    raise AssertionError("GET /health answered %d while loading (expected 503 or 200)"
                                         % resp.status)
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            if time.monotonic() > deadline:
                raise AssertionError("`%s` not healthy within %.0f s (last: %s):\n%s"
                                     % (" ".join(cmd), timeout, last, log_text()[-4000:]))
            time.sleep(0.1)
        return Server(proc, host, port, args, chunks, lock)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise


# ---- Raw sockets ----

class RawResponse:
    """What came back on a raw connection.
      raw: all bytes received; status: the status code (None when no status line came);
      headers: {lower-case name: value}; body: the bytes after the header block;
      closed: the server closed the connection (EOF) before our deadline;
      reset: the connection was reset; timed_out: the deadline passed first;
      elapsed: seconds from connect to the end of reading."""

    def __init__(self):
        self.raw = b""
        self.status = None
        self.reason = ""
        self.version = ""
        self.headers = {}
        self.body = b""
        self.closed = False
        self.reset = False
        self.timed_out = False
        self.elapsed = 0.0

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return ("RawResponse(status=%r, closed=%r, reset=%r, timed_out=%r, elapsed=%.2f, raw=%r)"
                % (self.status, self.closed, self.reset, self.timed_out, self.elapsed, self.raw[:300]))


_STATUS_RE = re.compile(rb"^(HTTP/\d\.\d) (\d{3}) ?([^\r\n]*)\r\n")


def parse_head(raw):
    """(version, status, reason, headers, body) of raw response bytes whose header block is
    complete, else None."""
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        return None
    m = _STATUS_RE.match(raw)
    if not m:
        return ("", None, "", {}, raw[end + 4:])
    headers = {}
    for line in raw[m.end():end].split(b"\r\n"):
        if b":" in line:
            k, v = line.split(b":", 1)
            headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return (m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1"), headers, raw[end + 4:])


def _response_complete(raw):
    """Whether `raw` holds one whole response framed by Content-Length."""
    head = parse_head(raw)
    if head is None or head[1] is None:
        return False
    length = head[3].get("content-length")
    if length is None or not length.isdigit():
        return False  # read to close
    return len(head[4]) >= int(length)


def connect(port, host="127.0.0.1", timeout=5.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(sock, timeout=5.0, until_close=False, started=None):
    """Reads one response from `sock` (by Content-Length, else until close) with an overall
    deadline of `timeout` seconds. Never raises on reset or timeout: see RawResponse's flags."""
    r = RawResponse()
    start = started if started is not None else time.monotonic()
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        if not until_close and _response_complete(buf):
            break
        left = deadline - time.monotonic()
        if left <= 0:
            r.timed_out = True
            break
        sock.settimeout(min(left, 1.0))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            r.reset = True
            break
        except OSError:
            r.reset = True
            break
        if not data:
            r.closed = True
            break
        buf += data
    r.raw = buf
    r.elapsed = time.monotonic() - start
    head = parse_head(buf)
    if head is not None:
        r.version, r.status, r.reason, r.headers, r.body = head
        length = r.headers.get("content-length")
        if length is not None and length.isdigit():
            r.body = r.body[:int(length)]
    return r


def raw_request(port, data, timeout=5.0, half_close=False, until_close=False, host="127.0.0.1"):
    """Sends `data` (bytes) on a fresh connection and reads the answer (one response by
    Content-Length, or until the server closes) within `timeout` seconds. half_close: shut our
    sending side once sent. A send the server cuts short (it answered early and closed) is not an
    error: what it sent is still read."""
    start = time.monotonic()
    s = connect(port, host=host, timeout=timeout)
    try:
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN: the server answered early and closed
            pass
        return read_response(s, timeout=max(0.1, timeout - (time.monotonic() - start)),
                             until_close=until_close, started=start)
    finally:
        s.close()


def build_request(method, path, body=None, headers=None, version="HTTP/1.1"):
    """Request bytes with Host, and Content-Type + Content-Length when a body is given."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    lines = ["%s %s %s" % (method, path, version), "Host: 127.0.0.1"]
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(body)]
    for k, v in (headers or {}).items():
        lines.append("%s: %s" % (k, v))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


# ---- http.client conveniences ----

def http_json(port, method, path, body=None, headers=None, timeout=30.0, host="127.0.0.1"):
    """(status, headers {lower: value}, parsed JSON or None, raw body bytes) of one request."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        parsed = None
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except ValueError:
            pass
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed, raw
    finally:
        conn.close()


def metrics(port, host="127.0.0.1", headers=None):
    """GET /metrics parsed: {"name" or 'name{labels}': float}."""
    status, _, _, raw = http_json(port, "GET", "/metrics", headers=headers, host=host)
    if status != 200:
        raise AssertionError("GET /metrics answered %d" % status)
    out = {}
    for line in raw.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def sse_events(body):
    """The `data:` payloads of a server-sent-event body, in order (strings)."""
    events = []
    text = body.decode("utf-8")
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        for line in block.split("\n"):
            if line.startswith("data: "):
                events.append(line[len("data: "):])
            elif line.strip():
                raise AssertionError("unexpected SSE line %r" % line)
    return events


def run_unittest_main():
    """unittest.main() that exits non-zero on failure (and zero on success)."""
    import unittest
    unittest.main(verbosity=2)
