"""Bounded load on loopback against `roofline serve --dummy-weights llama-tiny`.

200 concurrent streaming /v1/completions clients (one thread and one raw socket each; token-id
prompts of 8-40 ids, max_tokens 8-32, ignore_eos, temperature 0, usage in the stream); 10 % of
them, chosen by a seeded RNG, hang up mid-stream. Checks every other stream end to end (well-formed
events, finish_reason "length", usage.completion_tokens == max_tokens, [DONE], ids unique), that
the server counted exactly one engine request per client, and that afterwards every KV block is
back in the pool and nothing runs or waits. Prints one line:

  load: 200 clients (...), p50 X ms, p99 Y ms, Z tok/s

Also: a fresh server's /metrics reports its KV cache (all free), and SIGTERM under load drains the
streams within --shutdown-grace (or, past it, ends the rest) and exits 0.

Run: .venv/bin/python tests/server/load_test.py build/cpu/tools/cli/roofline   (stdlib only)
"""

import json
import os
import random
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402

BINARY = None  # set in __main__ / setUpModule
SERVER_ARGS = ["--dummy-weights", "llama-tiny", "--max-num-seqs", "32", "--max-waiting", "512"]
MODEL = "dummy-llama-tiny"
VOCAB = 512
NUM_CLIENTS = 200
DISCONNECT_SHARE = 0.10
SEED = 20261130
CLIENT_TIMEOUT_S = 40.0  # one client's whole stream; the test as a whole stays well under 60 s


def setUpModule():
    global BINARY
    if BINARY is None:
        BINARY = serve_util.binary_from_argv(from_argv=False)


class Client:
    def __init__(self, index, prompt, max_tokens, disconnect):
        self.index = index
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.disconnect = disconnect
        self.sent_at = None
        self.done_at = None
        self.response = None   # serve_util.RawResponse
        self.head_seen = False
        self.error = None      # an exception raised in the thread

    def body(self):
        return {"model": MODEL, "prompt": self.prompt, "max_tokens": self.max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}


def run_client(port, client, barrier):
    try:
        sock = serve_util.connect(port, timeout=CLIENT_TIMEOUT_S)
        try:
            data = serve_util.build_request("POST", "/v1/completions", client.body())
            try:
                barrier.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass
            client.sent_at = time.monotonic()
            sock.sendall(data)
            if client.disconnect:
                # Hang up once the stream has begun: the 200 head is sent as soon as the request is
                # queued, so the request is then waiting or running in the engine. (With the dummy
                # model every completion event carries "" and is skipped, so the first event is the
                # final one; closing after the head is what lands mid-stream.)
                buf = b""
                deadline = time.monotonic() + CLIENT_TIMEOUT_S
                while b"\r\n\r\n" not in buf and time.monotonic() < deadline:
                    sock.settimeout(max(0.05, deadline - time.monotonic()))
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                client.head_seen = buf.startswith(b"HTTP/1.1 200 ")
                client.response = serve_util.RawResponse()
                client.response.raw = buf
                # Abortive close (RST) half the time, orderly FIN the other half.
                if client.index % 2 == 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                client.response = serve_util.read_response(sock, timeout=CLIENT_TIMEOUT_S, until_close=True,
                                                           started=client.sent_at)
            client.done_at = time.monotonic()
        finally:
            sock.close()
    except Exception as e:  # reported by the test
        client.error = e


def percentile(values, p):
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class LoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = serve_util.start_server(BINARY, SERVER_ARGS)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def check_stream(self, c):
        """Asserts that client c's stream is complete and right; returns its completion id."""
        r = c.response
        where = "client %d (prompt %d ids, max_tokens %d)" % (c.index, len(c.prompt), c.max_tokens)
        self.assertFalse(r.timed_out, "%s: the stream did not end within %.0f s: %r" % (where, CLIENT_TIMEOUT_S, r))
        self.assertFalse(r.reset, "%s: connection reset: %r" % (where, r))
        self.assertTrue(r.closed, "%s: the server did not close the stream: %r" % (where, r))
        self.assertEqual(r.status, 200, "%s: %r" % (where, r))
        self.assertTrue(r.headers.get("content-type", "").startswith("text/event-stream"), where)
        self.assertTrue(r.body.endswith(b"data: [DONE]\n\n"), "%s: no final [DONE]: %r" % (where, r.body[-200:]))
        events = serve_util.sse_events(r.body)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events.count("[DONE]"), 1, where)
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertGreaterEqual(len(chunks), 2, "%s: %r" % (where, events))
        ids = {ch["id"] for ch in chunks}
        self.assertEqual(len(ids), 1, "%s: chunks of one stream carry several ids: %r" % (where, ids))
        finishes = []
        for ch in chunks[:-1]:
            self.assertEqual(ch["object"], "text_completion", where)
            self.assertEqual(ch["model"], MODEL, where)
            self.assertIsInstance(ch["created"], int, where)
            self.assertNotIn("usage", ch, where)
            self.assertEqual(len(ch["choices"]), 1, where)
            choice = ch["choices"][0]
            self.assertEqual(choice["index"], 0, where)
            self.assertIsInstance(choice["text"], str, where)
            if choice["finish_reason"] is not None:
                finishes.append(choice["finish_reason"])
        self.assertEqual(finishes, ["length"], "%s: finish reasons %r" % (where, finishes))
        self.assertIsNotNone(chunks[-2]["choices"][0]["finish_reason"], "%s: the finish is not the last choice chunk" % where)
        usage_chunk = chunks[-1]
        self.assertEqual(usage_chunk["choices"], [], where)
        usage = usage_chunk["usage"]
        self.assertEqual(usage["completion_tokens"], c.max_tokens, "%s: usage %r" % (where, usage))
        self.assertEqual(usage["prompt_tokens"], len(c.prompt), "%s: usage %r" % (where, usage))
        self.assertEqual(usage["total_tokens"], len(c.prompt) + c.max_tokens, "%s: usage %r" % (where, usage))
        return chunks[0]["id"]

    def test_0_metrics_before_any_request(self):
        # Runs first (name order): a fresh, idle server reports its whole KV cache, all of it free.
        m = serve_util.metrics(self.server.port)
        self.assertGreater(m["roofline_kv_cache_blocks_total"], 0,
                           "a fresh server reports no KV-cache blocks: %r" %
                           {k: v for k, v in m.items() if k.startswith("roofline_kv")})
        self.assertEqual(m["roofline_kv_cache_blocks_free"], m["roofline_kv_cache_blocks_total"])
        self.assertEqual(m["roofline_requests_running"], 0)
        self.assertEqual(m["roofline_requests_waiting"], 0)

    def test_concurrent_streams_with_disconnects(self):
        port = self.server.port
        rng = random.Random(SEED)
        n_disc = int(round(NUM_CLIENTS * DISCONNECT_SHARE))
        disconnecting = set(rng.sample(range(NUM_CLIENTS), n_disc))
        clients = []
        for i in range(NUM_CLIENTS):
            prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(8, 40))]
            clients.append(Client(i, prompt, rng.randint(8, 32), i in disconnecting))

        before = serve_util.metrics(port)
        barrier = threading.Barrier(NUM_CLIENTS)
        threads = [threading.Thread(target=run_client, args=(port, c, barrier), daemon=True) for c in clients]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.1, CLIENT_TIMEOUT_S + 15 - (time.monotonic() - t0)))
        hung = [c.index for c, t in zip(clients, threads) if t.is_alive()]
        self.assertEqual(hung, [], "clients still running after %.0f s" % (time.monotonic() - t0))
        errors = ["client %d: %r" % (c.index, c.error) for c in clients if c.error is not None]
        self.assertEqual(errors, [], "client errors:\n" + "\n".join(errors[:20]))

        # Every disconnecting client saw its stream begin (so its request was in the engine).
        no_head = [(c.index, c.response.raw[:200] if c.response else None) for c in clients
                   if c.disconnect and not c.head_seen]
        self.assertEqual(no_head, [], "disconnecting clients that got no 200 head")

        # Every other client: a whole, well-formed stream; ids unique across clients.
        completed = [c for c in clients if not c.disconnect]
        ids = {}
        for c in completed:
            cid = self.check_stream(c)
            self.assertNotIn(cid, ids, "id %s given to clients %d and %d" % (cid, ids.get(cid, -1), c.index))
            ids[cid] = c.index
        self.assertEqual(len(ids), len(completed))

        # Every KV block back in the pool, nothing running or waiting, the connections closed.
        deadline = time.monotonic() + 10
        while True:
            m = serve_util.metrics(port)
            settled = (m["roofline_kv_cache_blocks_free"] == m["roofline_kv_cache_blocks_total"]
                       and m["roofline_requests_running"] == 0 and m["roofline_requests_waiting"] == 0
                       and m["roofline_open_connections"] <= 1)
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(m["roofline_kv_cache_blocks_free"], m["roofline_kv_cache_blocks_total"],
                         "KV blocks still held 10 s after the load")
        self.assertEqual(m["roofline_requests_running"], 0)
        self.assertEqual(m["roofline_requests_waiting"], 0)
        self.assertLessEqual(m["roofline_open_connections"], 1, "connections still open 10 s after the load")

        # Exactly one engine request per client: none lost, none duplicated.
        submitted = m["roofline_requests_total"] - before["roofline_requests_total"]
        self.assertEqual(submitted, NUM_CLIENTS, "engine requests submitted for %d clients" % NUM_CLIENTS)
        aborted = m["roofline_requests_aborted_total"] - before["roofline_requests_aborted_total"]
        self.assertLessEqual(aborted, n_disc, "more requests aborted than clients hung up")
        generated = m["roofline_generation_tokens_total"] - before["roofline_generation_tokens_total"]
        completion_tokens = sum(c.max_tokens for c in completed)
        self.assertGreaterEqual(generated, completion_tokens)
        self.assertEqual(m.get('roofline_http_responses_total{status="429"}', 0),
                         before.get('roofline_http_responses_total{status="429"}', 0), "429s under the queue limit")

        # The server still serves.
        status, _, body, raw = serve_util.http_json(port, "POST", "/v1/completions",
                                                    {"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0})
        self.assertEqual(status, 200, raw)
        self.assertEqual(body["usage"]["completion_tokens"], 4)

        latencies_ms = [(c.done_at - c.sent_at) * 1e3 for c in completed]
        first = min(c.sent_at for c in completed)
        last = max(c.done_at for c in completed)
        wall = last - first
        print("\nload: %d clients (%d hung up mid-stream, %d of those aborted in the engine), %d streams "
              "checked, %d tokens in %.2f s, p50 %.0f ms, p99 %.0f ms, %.0f tok/s"
              % (NUM_CLIENTS, n_disc, aborted, len(completed), completion_tokens, wall,
                 percentile(latencies_ms, 50), percentile(latencies_ms, 99), completion_tokens / wall),
              flush=True)


class ShutdownUnderLoadTest(unittest.TestCase):
    """SIGTERM with streams running and queued: within the grace period they all finish; past it,
    the rest are cut off; either way the server exits 0 promptly."""

    def run_streams(self, server, n, max_tokens):
        results = [None] * n

        def client(i):
            body = {"prompt": [1, 2, 3], "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}
            try:
                results[i] = serve_util.raw_request(server.port, serve_util.build_request("POST", "/v1/completions",
                                                                                          body), timeout=30)
            except Exception as e:
                results[i] = e

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        return threads, results

    def wait_submitted(self, server, n):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if serve_util.metrics(server.port)["roofline_requests_total"] >= n:
                return
            time.sleep(0.01)
        self.fail("the %d requests were not all submitted" % n)

    def test_drain_within_grace(self):
        server = serve_util.start_server(BINARY, ["--dummy-weights", "llama-tiny", "--max-num-seqs", "2",
                                                  "--max-waiting", "64", "--shutdown-grace", "20"])
        try:
            n = 30
            threads, results = self.run_streams(server, n, 250)
            self.wait_submitted(server, n)
            t0 = time.monotonic()
            server.stop(timeout=25)
            stopped_in = time.monotonic() - t0
            for t in threads:
                t.join(10)
            for i, r in enumerate(results):
                self.assertIsInstance(r, serve_util.RawResponse, "client %d: %r" % (i, r))
                self.assertEqual(r.status, 200, "client %d: %r" % (i, r))
                self.assertTrue(r.body.endswith(b"data: [DONE]\n\n"), "client %d cut off: %r" % (i, r.body[-200:]))
                usage = json.loads(serve_util.sse_events(r.body)[-2])["usage"]
                self.assertEqual(usage["completion_tokens"], 250, "client %d" % i)
            self.assertLess(stopped_in, 20)
        finally:
            server.kill()

    def test_grace_expires(self):
        # 60 requests of 250 tokens, one at a time (~30 ms each on the dummy model, 2 cores), and a
        # grace of 0.5 s: the queue cannot drain in time, so the rest are aborted and their streams end.
        server = serve_util.start_server(BINARY, ["--dummy-weights", "llama-tiny", "--max-num-seqs", "1",
                                                  "--max-waiting", "64", "--shutdown-grace", "0.5"])
        try:
            n = 60
            threads, results = self.run_streams(server, n, 250)
            self.wait_submitted(server, n)
            t0 = time.monotonic()
            server.stop(timeout=15)
            self.assertLess(time.monotonic() - t0, 12, "exit took longer than grace + the 10 s close wait")
            for t in threads:
                t.join(10)
            finishes = []
            for i, r in enumerate(results):
                self.assertIsInstance(r, serve_util.RawResponse, "client %d: %r" % (i, r))
                self.assertFalse(r.timed_out, "client %d: the stream never ended: %r" % (i, r))
                self.assertEqual(r.status, 200, "client %d: %r" % (i, r))
                self.assertTrue(r.closed or r.reset, "client %d: %r" % (i, r))
                # A stream cut off by the shutdown may end with a finish_reason and [DONE], or just close.
                reasons = []
                for e in serve_util.sse_events(r.body):
                    if e != "[DONE]":
                        reasons += [c["finish_reason"] for c in json.loads(e).get("choices", []) if c["finish_reason"]]
                finishes.append(reasons[-1] if reasons else None)
            self.assertIn("length", finishes, "nothing finished within the grace period")
            self.assertLess(finishes.count("length"), n, "every stream finished: the grace period cut nothing off")
            print("\nshutdown with grace 0.5 s: finish reasons %r" %
                  {k: finishes.count(k) for k in set(finishes)}, flush=True)
        finally:
            server.kill()


if __name__ == "__main__":
    BINARY = serve_util.binary_from_argv()
    unittest.main(verbosity=2)
