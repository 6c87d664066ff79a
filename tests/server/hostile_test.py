"""Hostile input against `roofline serve --dummy-weights llama-tiny --max-body 64KiB`.

Malformed, truncated and oversized requests at the HTTP layer (raw sockets) and at the API layer
(bodies with wrong types, out-of-range and huge numbers, invalid UTF-8), a seeded byte mutator, one
slow sender (the 10 s header timeout), and the queue limit (429) on a second, one-slot server.
Every answer must be a well-framed HTTP response whose error body is OpenAI-style JSON that does
not echo the input; nothing may hang; and afterwards the server still serves.

Run: .venv/bin/python tests/server/hostile_test.py build/cpu/tools/cli/roofline   (stdlib only)
"""

import concurrent.futures
import json
import os
import random
import select
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402
from serve_util import build_request, raw_request  # noqa: E402

BINARY = None
SERVER_ARGS = ["--dummy-weights", "llama-tiny", "--max-body", "64KiB"]
MODEL = "dummy-llama-tiny"
VOCAB = 512
MAX_MODEL_LEN = 256
MAX_BODY = 64 * 1024
HEADER_TIMEOUT_S = 10.0
MARKER = "ZQXJ-hostile-marker-7c1e"  # must never come back in a response

VALID = {"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}


def setUpModule():
    global BINARY
    if BINARY is None:
        BINARY = serve_util.binary_from_argv(from_argv=False)


def completion(body, **headers):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return build_request("POST", "/v1/completions", body, headers)


def split_responses(raw):
    """Consecutive Content-Length-framed responses in `raw` (status, headers, body)."""
    out = []
    while raw:
        head = serve_util.parse_head(raw)
        if head is None or head[1] is None:
            break
        _, status, _, headers, rest = head
        n = int(headers.get("content-length", len(rest)))
        out.append((status, headers, rest[:n]))
        raw = rest[n:]
    return out


class HostileTest(unittest.TestCase):
    server = None
    slow = {}

    @classmethod
    def setUpClass(cls):
        cls.server = serve_util.start_server(BINARY, SERVER_ARGS)
        cls.dead_logs = []
        # The one slow test runs in the background while the others do: a partial request line,
        # then silence; the server must answer 408 (or close) once its header timeout passes.
        cls.slow = {}
        cls.slow_thread = threading.Thread(target=cls._slow_sender, args=(cls.server.port, cls.slow), daemon=True)
        cls.slow_thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    @staticmethod
    def _slow_sender(port, result):
        try:
            result["response"] = raw_request(port, b"POST /v1/completions HTT", timeout=HEADER_TIMEOUT_S + 5)
        except Exception as e:
            result["error"] = e

    def tearDown(self):
        # A test that kills the server must not take the rest down with it: restart and fail it.
        if not self.server.alive():
            log = self.server.log()
            code = self.server.proc.returncode
            type(self).server = serve_util.start_server(BINARY, SERVER_ARGS)
            self.fail("the server died during this test (exit code %s); last log:\n%s" % (code, log[-2000:]))

    # ---- helpers ----

    @property
    def port(self):
        return self.server.port

    def send(self, data, **kw):
        kw.setdefault("timeout", 5.0)
        return raw_request(self.port, data, **kw)

    def assert_error(self, r, status, msg="", marker=MARKER, param=None):
        """r is an OpenAI-style JSON error with this status, framed right, not echoing `marker`."""
        where = "%s -> %r" % (msg, r)
        self.assertFalse(r.timed_out, "timed out: " + where)
        self.assertEqual(r.status, status, where)
        self.assertTrue(r.raw.startswith(b"HTTP/1.1 %d " % status), where)
        self.assertEqual(r.headers.get("content-type"), "application/json", where)
        self.assertEqual(int(r.headers.get("content-length", -1)), len(r.body), where)
        body = json.loads(r.body.decode("utf-8"))
        self.assertEqual(set(body), {"error"}, where)
        err = body["error"]
        self.assertTrue({"message", "type", "param", "code"} <= set(err), where)
        self.assertIsInstance(err["message"], str, where)
        self.assertTrue(err["message"], where)
        self.assertLessEqual(len(err["message"]), 520, where)
        self.assertIsInstance(err["type"], str, where)
        self.assertEqual(err["code"], status, where)
        if param is not None:
            self.assertEqual(err["param"], param, where)
        if marker:
            self.assertNotIn(marker.encode(), r.raw, "the response echoes the input: " + where)
        return err

    def assert_ok_completion(self, r, max_tokens, prompt_len):
        # The request must be greedy or carry ignore_eos: a sampled request may draw the end token early.
        self.assertEqual(r.status, 200, repr(r))
        body = r.json()
        self.assertEqual(body["object"], "text_completion")
        self.assertEqual(body["model"], MODEL)
        self.assertEqual(body["usage"]["completion_tokens"], max_tokens, body)
        self.assertEqual(body["usage"]["prompt_tokens"], prompt_len, body)
        self.assertEqual(body["choices"][0]["finish_reason"], "length", body)

    # ---- the API layer ----

    # ---- POST /v1/profile: the next engine steps of live traffic, analysed (Engine::start_profile).

    def profile(self, body, timeout=10.0):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.send(build_request("POST", "/v1/profile", data), timeout=timeout)

    def test_profile_bad_bodies(self):
        cases = [({"steps": 0}, "steps"), ({"steps": 10001}, "steps"), ({"steps": 1.5}, "steps"),
                 ({"steps": "8"}, "steps"), ({"timeout_s": 0}, "timeout_s"), ({"timeout_s": 601}, "timeout_s"),
                 ({"trace": 1}, "trace"), ({"bandwidth_gbps": -1}, "bandwidth_gbps"),
                 ({"peak_tflops": "x"}, "peak_tflops"), ({MARKER: 1}, None)]
        for body, param in cases:
            self.assert_error(self.profile(body), 400, "profile %r" % (body,), param=param)
        self.assert_error(self.profile(b"[1, 2]"), 400, "array body")
        self.assert_error(self.profile(b"{\"steps\": "), 400, "truncated body")
        self.assert_error(self.send(build_request("GET", "/v1/profile")), 405, "GET")

    def test_profile_without_traffic_times_out(self):
        t0 = time.monotonic()
        self.assert_error(self.profile({"steps": 2, "timeout_s": 0.3}), 504, "idle server")
        self.assertLess(time.monotonic() - t0, 5.0)

    def test_profile_of_live_traffic(self):
        result = {}

        def run():
            result["r"] = self.profile({"steps": 3, "timeout_s": 30, "trace": True}, timeout=40)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.3)  # armed before the request's steps run
        # A second profile while the first waits: 409.
        self.assert_error(self.profile({"steps": 1, "timeout_s": 1}), 409, "second profile")
        r = self.send(completion({"prompt": [1, 2, 3], "max_tokens": 8, "temperature": 0}), timeout=30)
        self.assertEqual(r.status, 200, r)
        t.join(40)
        pr = result.get("r")
        self.assertIsNotNone(pr)
        self.assertEqual(pr.status, 200, pr)
        body = json.loads(pr.body.decode("utf-8"))
        self.assertEqual(body["object"], "profile")
        self.assertEqual(body["steps"], 3)
        self.assertIn("measured", body["report"])
        self.assertIsInstance(body["analysis"], dict)
        self.assertGreater(body["ms_per_step"], 0)
        self.assertIn("traceEvents", body["trace"])
        self.assertTrue(body["trace"]["traceEvents"])

    def test_malformed_and_truncated_json(self):
        m = MARKER
        valid = json.dumps({"prompt": [1, 2, 3], "max_tokens": 2, "user": m})
        bodies = [
            valid[:-1],                      # truncated at every interesting point
            valid[: len(valid) // 2],
            valid[: valid.index(m) + 5],
            '{"prompt": [1, 2, "%s' % m,
            '{"prompt": %s}' % m,
            '{"prompt": [1, 2],}',
            "{'prompt': [1], 'x': '%s'}" % m,
            '{"prompt": [1] "x": "%s"}' % m,
            '{"prompt": [1], "x": "%s"} trailing %s' % (m, m),
            m,
            "",
            " ",
            "{",
            "}",
            "[",
            '"%s"' % m,
            "null",
            "true",
            "123",
            "[1, 2, 3]",
            '{"prompt": [1], "x": "\\u12"}',
            '{"prompt": [1], "x": "\\q%s"}' % m,
            '{"prompt": [1], "x": "tab\there %s"}' % m,   # raw control byte in a string
            '{"prompt": [1], "temperature": NaN, "x": "%s"}' % m,
            '{"prompt": [1], "temperature": Infinity}',
            '{"prompt": [1], "max_tokens": 01}',
            '{"prompt": [1], "max_tokens": 1.}',
            '{"prompt": [1], "max_tokens": -}',
            '{"prompt": [1], "x": "\\ud800 %s"}' % m,     # a lone surrogate escape
            "[" * 20000 + "]" * 20000,                  # deep nesting
            '{"prompt": [1], "x": ' + "[" * 30000 + "]" * 30000 + ', "y": "%s"' % m,
        ]
        for body in bodies:
            with self.subTest(body=body[:60]):
                r = self.send(completion(body.encode()))
                self.assert_error(r, 400, body[:60])
                self.assertEqual(r.headers.get("connection"), "keep-alive", "an API error keeps the connection")

    def test_wrong_types_and_ranges(self):
        cases = [
            # (fields merged into a valid body, the param the error names)
            ({"prompt": 5}, "prompt"),
            ({"prompt": True}, "prompt"),
            ({"prompt": {"ids": [1]}}, "prompt"),
            ({"prompt": []}, "prompt"),
            ({"prompt": [[1, 2], [3]]}, "prompt"),
            ({"prompt": [1, "2"]}, "prompt"),
            ({"prompt": [1, 2.5]}, "prompt"),
            ({"prompt": [1, None]}, "prompt"),
            ({"prompt": None}, "prompt"),
            ({"prompt": "text needs a tokenizer"}, "prompt"),
            ({"prompt": ["text"]}, "prompt"),
            ({"max_tokens": "10"}, "max_tokens"),
            ({"max_tokens": 10.5}, "max_tokens"),
            ({"max_tokens": 5.0}, "max_tokens"),
            ({"max_tokens": 1e30}, "max_tokens"),
            ({"max_tokens": True}, "max_tokens"),
            ({"max_tokens": [4]}, "max_tokens"),
            ({"max_tokens": 0}, "max_tokens"),
            ({"max_tokens": -1}, "max_tokens"),
            ({"max_tokens": -(2 ** 63)}, "max_tokens"),
            ({"temperature": -1}, "temperature"),
            ({"temperature": 2.5}, "temperature"),
            ({"temperature": "hot"}, "temperature"),
            ({"temperature": 1e300}, "temperature"),
            ({"top_p": 0}, "top_p"),
            ({"top_p": 1.5}, "top_p"),
            ({"top_k": -2}, "top_k"),
            ({"top_k": "5"}, "top_k"),
            ({"min_p": 2}, "min_p"),
            ({"repetition_penalty": 0}, "repetition_penalty"),
            ({"presence_penalty": 3}, "presence_penalty"),
            ({"frequency_penalty": -2.5}, "frequency_penalty"),
            ({"n": 0}, "n"),
            ({"n": 17}, "n"),
            ({"n": 1000}, "n"),
            ({"n": "3"}, "n"),
            ({"n": 2.5}, "n"),
            ({"best_of": 2}, "best_of"),
            ({"stop": 5}, "stop"),
            ({"stop": [1]}, "stop"),
            ({"stop": {"a": "b"}}, "stop"),
            ({"stop": ["x"] * 17}, "stop"),
            ({"stop": ""}, "stop"),
            ({"stop": "needs a tokenizer"}, "stop"),
            ({"stop_token_ids": 5}, "stop_token_ids"),
            ({"stop_token_ids": [VOCAB]}, "stop_token_ids"),
            ({"stop_token_ids": [-1]}, "stop_token_ids"),
            ({"stop_token_ids": ["1"]}, "stop_token_ids"),
            ({"stream": "yes"}, "stream"),
            ({"stream": 1}, "stream"),
            ({"stream_options": "usage"}, "stream_options"),
            ({"stream_options": {"include_usage": "yes"}}, "include_usage"),
            ({"ignore_eos": "true"}, "ignore_eos"),
            ({"echo": True}, "echo"),
            ({"seed": "42"}, "seed"),
            ({"seed": 1.5}, "seed"),
            ({"model": 5}, "model"),
            ({"model": ["x"]}, "model"),
            ({"logprobs": 21}, "logprobs"),
            ({"logprobs": -1}, "logprobs"),
            ({"logprobs": "5"}, "logprobs"),
            ({"logit_bias": {"x": 5}}, "logit_bias"),
            ({"logit_bias": {"1": 500}}, "logit_bias"),
            ({"logit_bias": {"99999": 1}}, "logit_bias"),
            ({"suffix": "tail"}, "suffix"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
            ({"tool_choice": "auto"}, "tool_choice"),
            ({"functions": [{"name": "f"}]}, "functions"),
            ({"response_format": {"type": "json_object"}}, "response_format"),
            ({"response_format": "text"}, "response_format"),
        ]
        for fields, param in cases:
            body = dict(VALID)
            body.update(fields)
            body["user"] = MARKER
            with self.subTest(fields=fields):
                self.assert_error(self.send(completion(body)), 400, repr(fields), param=param)
        # The chat endpoint's own fields (and a model without a chat template).
        chat_cases = [
            ({}, "messages"),
            ({"messages": []}, "messages"),
            ({"messages": "hi"}, "messages"),
            ({"messages": [{"content": "x"}]}, "messages[0]"),
            ({"messages": ["x"]}, "messages[0]"),
            ({"messages": [{"role": 5, "content": "x"}]}, "messages[0]"),
            ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
            ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
            ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
             "messages[0].content"),
            ({"messages": [{"role": "user", "content": "hi"}]}, "messages"),  # no tokenizer
            ({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1}, None),
        ]
        for fields, param in chat_cases:
            body = dict(fields)
            body["user"] = MARKER
            with self.subTest(chat=fields):
                r = self.send(build_request("POST", "/v1/chat/completions", body))
                self.assert_error(r, 400, repr(fields), param=param)

    def test_huge_and_extreme_numbers(self):
        cases = [
            ('{"prompt": [1], "max_tokens": 18446744073709551615}', "max_tokens"),
            ('{"prompt": [1], "max_tokens": 18446744073709551616}', "max_tokens"),
            ('{"prompt": [1], "max_tokens": 99999999999999999999999999999999999999}', "max_tokens"),
            ('{"prompt": [1], "max_tokens": 2147483648}', "max_tokens"),
            ('{"prompt": [1], "max_tokens": -9223372036854775809}', "max_tokens"),
            ('{"prompt": [1], "n": 9223372036854775807}', "n"),
            ('{"prompt": [1], "seed": 18446744073709551615}', "seed"),
            ('{"prompt": [1], "top_k": 9223372036854775807}', "top_k"),
            ('{"prompt": [18446744073709551615]}', "prompt"),
            ('{"prompt": [9223372036854775807]}', "prompt"),
            ('{"prompt": [-9223372036854775808]}', "prompt"),
            ('{"prompt": [-9223372036854775809]}', "prompt"),
            ('{"prompt": [1e3]}', "prompt"),
            ('{"prompt": [1], "temperature": 1e308}', "temperature"),
            ('{"prompt": [1], "temperature": -1e308}', "temperature"),
            ('{"prompt": [1], "temperature": 1e-400}', None),  # underflows to 0: valid (200)
        ]
        for body, param in cases:
            body = body[:-1] + ', "user": "%s"}' % MARKER
            with self.subTest(body=body[:70]):
                r = self.send(completion(body.encode()))
                if param is None:
                    self.assertIn(r.status, (200, 400), repr(r))
                else:
                    self.assert_error(r, 400, body[:70], param=param)

    def test_number_overflowing_double(self):
        # JSON numbers beyond a double's range: a 400 like any other bad number, not a crash. (On a
        # server of its own, so that a crash cannot cut the shared one's slow-sender test short.)
        server = serve_util.start_server(BINARY, SERVER_ARGS)
        crashes = []
        try:
            for body in ('{"prompt": [1], "temperature": 1e400}',
                         '{"prompt": [1], "max_tokens": 1e400}',
                         '{"prompt": [1], "x": -1e999, "user": "%s"}' % MARKER,
                         '{"prompt": [1], "max_tokens": 1' + "0" * 400 + '}',
                         '[1e400]'):
                with self.subTest(body=body[:60]):
                    r = raw_request(server.port, completion(body.encode()), timeout=5)
                    try:
                        server.proc.wait(0.3)
                    except Exception:
                        pass
                    if not server.alive():
                        crashes.append("POST /v1/completions %s -> %r; the server died (exit code %s):\n%s"
                                       % (body[:60], r, server.proc.returncode, server.log()[-600:]))
                        server = serve_util.start_server(BINARY, SERVER_ARGS)
                        continue
                    self.assert_error(r, 400, body[:60])
        finally:
            server.kill()
        self.assertEqual(crashes, [], "\n".join(crashes))

    def test_invalid_utf8(self):
        m = MARKER.encode()
        bad = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xe2\x82",
               b"\xf4\x90\x80\x80", b"\x80", b"abc\xc3"]
        for seq in bad:
            for body in (b'{"prompt": "' + seq + b'", "user": "' + m + b'"}',
                         b'{"prompt": [1], "model": "' + seq + m + b'"}',
                         b'{"prompt": [1], "' + seq + b'": "' + m + b'"}',
                         b'{"prompt": [1], "user": "' + m + b'"}' + seq):
                with self.subTest(body=body):
                    err = self.assert_error(self.send(completion(body)), 400, repr(body))
                    if not body.endswith(seq):
                        self.assertIn("UTF-8", err["message"], body)
        # Non-ASCII bytes in a header value are tolerated (not UTF-8-checked) and not echoed.
        r = self.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Junk: \xff\xfe\xc3\x28\r\n\r\n")
        self.assertEqual(r.status, 200, repr(r))

    def test_model_name_not_echoed(self):
        for model in (MARKER, MARKER + "\n\r\"'\\<script>", "\u00e9" * 300 + MARKER, ""):
            with self.subTest(model=model[:40]):
                body = dict(VALID, model=model)
                err = self.assert_error(self.send(completion(body)), 404, model[:40], param="model")
                self.assertEqual(err["type"], "not_found_error")
        r = self.send(build_request("GET", "/v1/models/" + MARKER))
        self.assert_error(r, 404, "/v1/models/<marker>")
        r = self.send(build_request("GET", "/v1/models/" + MODEL))
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.json()["id"], MODEL)

    def test_prompt_token_ids_out_of_vocabulary(self):
        for ids, bad_id in (([1, VOCAB], VOCAB), ([VOCAB + 1000], VOCAB + 1000), ([-1], -1),
                            ([0, 1, -5, 2], -5), ([2 ** 31], 2 ** 31)):
            with self.subTest(ids=ids):
                err = self.assert_error(self.send(completion({"prompt": ids, "max_tokens": 1})), 400,
                                        repr(ids), param="prompt")
                self.assertIn(str(bad_id), err["message"])
                self.assertIn(str(VOCAB), err["message"])
        # The edges of the vocabulary are fine.
        edges = {"prompt": [0, VOCAB - 1], "max_tokens": 3, "ignore_eos": True}
        self.assert_ok_completion(self.send(completion(edges)), 3, 2)

    def test_prompt_plus_max_tokens_over_context(self):
        err = self.assert_error(self.send(completion({"prompt": [1] * 200, "max_tokens": 100})), 400,
                                "200 + 100 > %d" % MAX_MODEL_LEN, param="max_tokens")
        for number in ("256", "300", "200", "100"):
            self.assertIn(number, err["message"])
        err = self.assert_error(self.send(completion({"prompt": [1] * MAX_MODEL_LEN, "max_tokens": 1})), 400,
                                "a prompt of the whole context", param="prompt")
        self.assertIn(str(MAX_MODEL_LEN), err["message"])
        err = self.assert_error(self.send(completion({"prompt": [1] * 300})), 400, "a prompt over the context")
        self.assertIn("300", err["message"])
        self.assertIn(str(MAX_MODEL_LEN), err["message"])
        # Exactly the context: accepted and generated to the end.
        self.assert_ok_completion(self.send(completion({"prompt": [1] * (MAX_MODEL_LEN - 10), "max_tokens": 10,
                                                        "ignore_eos": True})), 10, MAX_MODEL_LEN - 10)

    # ---- the HTTP layer ----

    def test_body_over_limit(self):
        big = b'{"prompt": [1], "x": "' + (MARKER.encode() * 4000)[:MAX_BODY + 100] + b'"}'
        r = self.send(completion(big))
        err = self.assert_error(r, 413, "a body over --max-body")
        self.assertIn(str(MAX_BODY), err["message"])
        self.assertEqual(r.headers.get("connection"), "close")
        # Announced but not sent: answered from the headers alone.
        r = self.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
        self.assert_error(r, 413, "Content-Length 1e9")
        r = self.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        self.assert_error(r, 413, "Content-Length max+1")
        # Exactly the limit is accepted.
        core = json.dumps(dict(VALID)).encode()
        exact = core[:-1] + b" " * (MAX_BODY - len(core)) + b"}"
        self.assertEqual(len(exact), MAX_BODY)
        self.assert_ok_completion(self.send(completion(exact)), 2, 3)

    def test_content_length_variants(self):
        cases = [
            (b"Content-Length: -1", 400),
            (b"Content-Length: +5", 400),
            (b"Content-Length: 0x10", 400),
            (b"Content-Length: 1 2", 400),
            (b"Content-Length: 99999999999999999999999", 400),
            (b"Content-Length: 5\r\nContent-Length: 6", 400),
            (b"Content-Length:", 400),
        ]
        for header, status in cases:
            with self.subTest(header=header):
                data = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n{}"
                self.assert_error(self.send(data), status, repr(header))
        # A POST without Content-Length: 411.
        self.assert_error(self.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"), 411, "no Content-Length")
        # Content-Length larger than what is sent, then our side closes: the server closes too,
        # promptly and without a response (no request arrived whole).
        r = self.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"",
                      half_close=True, until_close=True)
        self.assertTrue(r.closed and not r.timed_out, repr(r))
        self.assertLess(r.elapsed, 2.0, repr(r))

    def test_transfer_encoding(self):
        for te in (b"chunked", b"gzip, chunked", b"identity"):
            with self.subTest(te=te):
                data = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                        b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
                r = self.send(data)
                self.assert_error(r, 501, repr(te))
                self.assertEqual(r.headers.get("connection"), "close")
        # Both Transfer-Encoding and Content-Length (a request-smuggling shape): refused.
        data = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        self.assert_error(self.send(data), 501, "TE + CL")

    def test_http_versions(self):
        for version, status in ((b"HTTP/2.0", 505), (b"HTTP/1.2", 505), (b"HTTP/0.9", 505), (b"HTTP/3.0", 505),
                                (b"HTTP/1.1x", 400), (b"http/1.1", 400), (b"HTTP/1", 400), (b"HTTP/11", 400),
                                (b"HTTPS/1.1", 400)):
            with self.subTest(version=version):
                r = self.send(b"GET /health " + version + b"\r\nHost: x\r\n\r\n")
                self.assert_error(r, status, repr(version))
        # HTTP/2 prior-knowledge preface.
        r = self.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        self.assertIn(r.status, (400, 505), repr(r))
        self.assert_error(r, r.status, "h2 preface")
        # A request line with no version at all (HTTP/0.9 style).
        self.assert_error(self.send(b"GET /health\r\n\r\n"), 400, "no version")
        # HTTP/1.0 is served, and closes unless asked to keep alive.
        r = self.send(b"GET /health HTTP/1.0\r\n\r\n", until_close=True)
        self.assertEqual(r.status, 200, repr(r))
        self.assertTrue(r.closed, repr(r))

    def test_header_limits(self):
        r = self.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        self.assert_error(r, 431, "20 KB header")
        # The same without the blank line: refused as soon as the limit passes, not after a timeout.
        r = self.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000)
        self.assert_error(r, 431, "20 KB header, unterminated")
        self.assertLess(r.elapsed, 2.0)
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
        self.assert_error(self.send(b"GET /health HTTP/1.1\r\n" + many + b"\r\n"), 431, "150 headers")

    def test_target_limits(self):
        r = self.send(b"GET /" + b"a" * 10240 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assert_error(r, 414, "10 KB target")
        r = self.send(b"GET /v1/models?" + (MARKER.encode() * 400) + b" HTTP/1.1\r\n\r\n")
        self.assert_error(r, 414, "10 KB query")
        r = self.send(b"GET /" + b"a" * 10240)  # no line end yet
        self.assert_error(r, 414, "10 KB target, unterminated")
        self.assertLess(r.elapsed, 2.0)

    def test_malformed_request_lines_and_headers(self):
        cases = [
            b"GET /health HTTP/1.1\nHost: x\n\n",                    # bare LF
            b"GET /health HTTP/1.1\r\nHost: x\r\n continued\r\n\r\n",  # folded header
            b"GET /health HTTP/1.1\r\nNoColon\r\n\r\n",
            b"GET /health HTTP/1.1\r\n: empty-name\r\n\r\n",
            b"GET /health HTTP/1.1\r\nBad Name: x\r\n\r\n",
            b"GET /health HTTP/1.1\r\nX: a\x00b\r\n\r\n",
            b"GET /health HTTP/1.1\r\nX: a\x01b\r\n\r\n",
            b"GET  /health HTTP/1.1\r\n\r\n",
            b"GET /health  HTTP/1.1\r\n\r\n",
            b" GET /health HTTP/1.1\r\n\r\n",
            b"GET\t/health HTTP/1.1\r\n\r\n",
            b"G(T /health HTTP/1.1\r\n\r\n",
            b"GET health HTTP/1.1\r\n\r\n",
            b"GET * HTTP/1.1\r\n\r\n",
            b"GET http://127.0.0.1/health HTTP/1.1\r\n\r\n",
            b"GET /he\x00alth HTTP/1.1\r\n\r\n",
            b"GET /he\xffalth HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
            b"GET /health HTTP/1.1\r\n\r\n"[:-4] + b"\r\r\n\r\n",
        ]
        for data in cases:
            with self.subTest(data=data[:50]):
                r = self.send(data)
                self.assert_error(r, 400, repr(data[:50]))
                self.assertEqual(r.headers.get("connection"), "close")

    def test_bare_lf_after_the_request_line(self):
        # A CRLF request line, then LF-only header lines: as much a bare-LF request as one that
        # uses LF throughout, so the same prompt 400 -- not silence until the header timeout.
        for data in (b"GET /health HTTP/1.1\r\nHost: x\n\n",
                     b"GET /health HTTP/1.1\r\nHost: x\n\r\n",
                     b"POST /v1/completions HTTP/1.1\r\nHost: x\nContent-Length: 2\n\n{}"):
            with self.subTest(data=data):
                r = self.send(data, timeout=3)
                self.assert_error(r, 400, repr(data))
                self.assertLess(r.elapsed, 2.0)

    def test_garbage_bytes(self):
        rng = random.Random(1234)
        blobs = [bytes(range(256)) * 4,
                 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(rng.randrange(256) for _ in range(300)),
                 b"\x00" * 1000,
                 b"\xff" * 70000,
                 MARKER.encode() * 10 + b"\r\n\r\n",
                 b"SSH-2.0-OpenSSH_9.2\r\n",
                 b"\r\n" * 5000]
        blobs += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000))) for _ in range(20)]
        for blob in blobs:
            with self.subTest(blob=blob[:20]):
                r = self.send(blob, half_close=True, timeout=5)
                self.assertFalse(r.timed_out, repr(r))
                if r.raw:
                    self.assertIn(r.status, (400, 414, 431, 505), repr(r))
                    self.assert_error(r, r.status, repr(blob[:20]))
                else:
                    self.assertTrue(r.closed, repr(r))

    def test_unknown_path_and_wrong_method(self):
        for path in ("/", "/v1", "/v2/completions", "/v1/completion", "/v1/completions/", "/V1/completions",
                     "/v1/chat", "/" + MARKER, "/v1/../health", "/%2e%2e/etc/passwd"):
            with self.subTest(path=path):
                self.assert_error(self.send(completion(VALID).replace(b"/v1/completions", path.encode(), 1)),
                                  404, path)
                self.assert_error(self.send(build_request("GET", path)), 404, path)
        for method, path in (("GET", "/v1/completions"), ("GET", "/v1/chat/completions"), ("PUT", "/v1/completions"),
                             ("DELETE", "/v1/completions"), ("POST", "/health"), ("POST", "/metrics"),
                             ("POST", "/v1/models"), ("DELETE", "/v1/models"),
                             ("OPTIONS", "/v1/completions"), ("BREW", "/v1/completions")):
            with self.subTest(method=method, path=path):
                body = b"{}" if method in ("POST", "PUT") else None
                self.assert_error(self.send(build_request(method, path, body)), 405, method + " " + path)
        # HEAD is GET without a body: the head says how long the body would be, none follows.
        r = raw_request(self.port, b"HEAD /health HTTP/1.1\r\nConnection: close\r\n\r\n", until_close=True)
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.body, b"", repr(r))
        self.assertEqual(r.headers.get("content-length"), "15", repr(r))
        r = raw_request(self.port, b"HEAD /v1/completions HTTP/1.1\r\nConnection: close\r\n\r\n", until_close=True)
        self.assertEqual(r.status, 405, repr(r))
        self.assertEqual(r.body, b"", repr(r))
        # A query string is not part of the path.
        r = self.send(build_request("GET", "/health?x=" + MARKER))
        self.assertEqual(r.status, 200, repr(r))

    def test_keep_alive_and_pipelining(self):
        # Errors the API layer answers keep the connection; the next request on it is served.
        s = serve_util.connect(self.port)
        try:
            s.sendall(completion(b'{"prompt": [1, 2'))
            r1 = serve_util.read_response(s)
            self.assert_error(r1, 400, "first")
            s.sendall(completion(VALID))
            r2 = serve_util.read_response(s)
            self.assert_ok_completion(r2, 2, 3)
        finally:
            s.close()
        # Three pipelined requests in one write: three responses, in order.
        data = (build_request("GET", "/health") + completion({"prompt": [1], "max_tokens": 3, "ignore_eos": True}) +
                build_request("GET", "/v1/models", headers={"Connection": "close"}))
        r = self.send(data, until_close=True)
        responses = split_responses(r.raw)
        self.assertEqual([x[0] for x in responses], [200, 200, 200], r.raw[:500])
        self.assertEqual(json.loads(responses[1][2])["usage"]["completion_tokens"], 3)
        self.assertEqual(json.loads(responses[2][2])["data"][0]["id"], MODEL)

    def test_mutator(self):
        """~300 seeded mutations of valid requests: each gets a well-framed response with a status
        in 2xx-5xx (errors as JSON) or a clean close -- never a hang over 5 s."""
        rng = random.Random(0x5EED)
        templates = [
            build_request("GET", "/health", headers={"Connection": "close"}),
            build_request("GET", "/v1/models", headers={"User-Agent": "mutator/1", "Connection": "close"}),
            build_request("POST", "/v1/completions", dict(VALID), {"Connection": "close"}),
            build_request("POST", "/v1/completions", {"prompt": [5, 6], "max_tokens": 3, "stream": True}),
            build_request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
            build_request("GET", "/metrics", headers={"Accept": "*/*"}),
        ]
        interesting = b"\x00\r\n :/{}[]\",0123456789\xff\x7f\t-.eE?%"

        def mutate(data):
            data = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                op = rng.randrange(6)
                i = rng.randrange(len(data)) if data else 0
                if op == 0 and data:
                    data[i] ^= 1 << rng.randrange(8)
                elif op == 1 and data:
                    data[i] = rng.choice(interesting)
                elif op == 2:
                    data.insert(i, rng.choice(interesting) if rng.random() < 0.7 else rng.randrange(256))
                elif op == 3 and data:
                    del data[i:i + rng.randint(1, 4)]
                elif op == 4 and data:
                    j = rng.randrange(len(data))
                    data[j:j] = data[i:i + rng.randint(1, 16)]
                elif op == 5 and rng.random() < 0.3:
                    del data[i:]
            return bytes(data)

        cases = [mutate(rng.choice(templates)) for _ in range(300)]
        port = self.port

        def run_case(data):
            start = time.monotonic()
            s = serve_util.connect(port, timeout=5)
            buf, closed, reset, half_closed = b"", False, False, False
            try:
                try:
                    s.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                while True:
                    now = time.monotonic() - start
                    if now > 5.0:
                        break
                    if buf and serve_util._response_complete(buf):
                        break
                    if not buf and not half_closed and now > 0.5:
                        # An incomplete request: say that no more is coming.
                        try:
                            s.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        half_closed = True
                    ready, _, _ = select.select([s], [], [], 0.05)
                    if not ready:
                        continue
                    try:
                        chunk = s.recv(65536)
                    except (ConnectionResetError, OSError):
                        reset = True
                        break
                    if not chunk:
                        closed = True
                        break
                    buf += chunk
            finally:
                s.close()
            return data, buf, closed, reset, time.monotonic() - start

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(run_case, cases))
        stats = {}
        for data, buf, closed, reset, elapsed in results:
            where = "mutated request %r -> %r (closed %s, reset %s, %.2f s)" % (data[:200], buf[:300], closed, reset,
                                                                              elapsed)
            self.assertLess(elapsed, 5.0, "hang: " + where)
            if not buf:
                self.assertTrue(closed, "neither a response nor a clean close: " + where)
                stats["close"] = stats.get("close", 0) + 1
                continue
            head = serve_util.parse_head(buf)
            self.assertIsNotNone(head, "an incomplete response head: " + where)
            version, status, _, headers, body = head
            self.assertEqual(version, "HTTP/1.1", where)
            self.assertTrue(200 <= status <= 599, where)
            self.assertNotEqual(status, 500, where)
            stats[status] = stats.get(status, 0) + 1
            if "content-length" in headers:
                # (More may follow: a mutation can split one request into two, both answered.)
                self.assertGreaterEqual(len(body), int(headers["content-length"]), "a short body: " + where)
            else:
                self.assertEqual(headers.get("content-type"), "text/event-stream", where)
                self.assertTrue(body.endswith(b"data: [DONE]\n\n") or closed, where)
            if status >= 400:
                err = json.loads(body.decode("utf-8"))["error"]
                self.assertEqual(err["code"], status, where)
        print("\nmutator: %d cases: %s" % (len(cases), ", ".join("%s: %d" % (k, v) for k, v in
                                                                 sorted(stats.items(), key=lambda kv: str(kv[0])))),
              flush=True)
        r = self.send(build_request("GET", "/health"))
        self.assertEqual(r.status, 200, repr(r))

    # ---- last: the slow sender, then the server still serves ----

    def test_zz1_header_timeout(self):
        self.slow_thread.join(HEADER_TIMEOUT_S + 10)
        self.assertFalse(self.slow_thread.is_alive(), "the slow sender never finished")
        self.assertNotIn("error", self.slow, self.slow.get("error"))
        r = self.slow["response"]
        self.assertFalse(r.timed_out, "no 408 and no close within %.0f s: %r" % (HEADER_TIMEOUT_S + 5, r))
        self.assertGreater(r.elapsed, HEADER_TIMEOUT_S - 2, "cut off before the header timeout: %r" % r)
        if r.raw:
            self.assert_error(r, 408, "slow sender")
            self.assertEqual(r.headers.get("connection"), "close")
        else:
            self.assertTrue(r.closed, repr(r))

    def test_zz2_still_serving(self):
        r = self.send(build_request("GET", "/health"))
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.json(), {"status": "ok"})
        body = {"prompt": [7, 8, 9, 10], "max_tokens": 5, "ignore_eos": True}
        self.assert_ok_completion(self.send(completion(body)), 5, 4)
        r = self.send(build_request("POST", "/v1/completions", {"prompt": [7, 8], "max_tokens": 4, "ignore_eos": True,
                                                                 "stream": True,
                                                                 "stream_options": {"include_usage": True}}),
                      until_close=True)
        self.assertEqual(r.status, 200, repr(r))
        events = serve_util.sse_events(r.body)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(json.loads(events[-2])["usage"]["completion_tokens"], 4)
        # Nothing left running, every KV block free, only this connection open.
        deadline = time.monotonic() + 10
        while True:
            m = serve_util.metrics(self.port)
            if ((m["roofline_kv_cache_blocks_free"] == m["roofline_kv_cache_blocks_total"]
                 and m["roofline_requests_running"] == 0 and m["roofline_open_connections"] <= 1)
                    or time.monotonic() > deadline):
                break
            time.sleep(0.1)
        self.assertEqual(m["roofline_kv_cache_blocks_free"], m["roofline_kv_cache_blocks_total"])
        self.assertEqual(m["roofline_requests_running"], 0)
        self.assertEqual(m["roofline_requests_waiting"], 0)
        self.assertLessEqual(m["roofline_open_connections"], 1, m)
        self.assertEqual(m.get('roofline_http_responses_total{status="500"}', 0), 0)


class QueueLimitTest(unittest.TestCase):
    """A one-slot server (--max-num-seqs 1 --max-waiting 0): a full queue answers 429."""

    @classmethod
    def setUpClass(cls):
        cls.server = serve_util.start_server(BINARY, ["--dummy-weights", "llama-tiny", "--max-num-seqs", "1",
                                                      "--max-waiting", "0"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_queue_full(self):
        port = self.server.port
        # Concurrent long requests: one runs, the others find the queue full.
        n = 24
        barrier = threading.Barrier(n)
        results = [None] * n

        def client(i):
            s = serve_util.connect(port, timeout=20)
            try:
                data = build_request("POST", "/v1/completions", {"prompt": [1, 2], "max_tokens": 250,
                                                                 "ignore_eos": True, "stream": i % 2 == 0})
                barrier.wait(10)
                s.sendall(data)
                results[i] = serve_util.read_response(s, timeout=20)  # a stream: to its close
            finally:
                s.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        statuses = [r.status if r else None for r in results]
        self.assertTrue(set(statuses) <= {200, 429}, statuses)
        self.assertIn(200, statuses)
        self.assertIn(429, statuses)
        for r in results:
            self.assertFalse(r.timed_out, repr(r))
            if r.status == 429:
                self.assertEqual(r.headers.get("retry-after"), "1", repr(r))
                self.assertEqual(r.headers.get("connection"), "keep-alive", repr(r))
                err = r.json()["error"]
                self.assertEqual((err["code"], err["type"]), (429, "rate_limit_error"))
            elif r.headers.get("content-type") == "text/event-stream":
                self.assertTrue(r.body.endswith(b"data: [DONE]\n\n"), repr(r))
            else:
                self.assertEqual(r.json()["usage"]["completion_tokens"], 250)
        # Once idle, the slot is free again.
        status, _, body, raw = serve_util.http_json(port, "POST", "/v1/completions", {"prompt": [1], "max_tokens": 2})
        self.assertEqual(status, 200, raw)


if __name__ == "__main__":
    BINARY = serve_util.binary_from_argv()
    unittest.main(verbosity=2)
