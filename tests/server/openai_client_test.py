"""The official `openai` Python client against `roofline serve` on the default model
(.models/SmolLM2-135M-Instruct.Q4_1.gguf): completions and chat, streamed and not, n, stop strings,
seeds, the model list, errors, and --api-key.

Run: .venv/bin/python tests/server/openai_client_test.py build/cpu/tools/cli/roofline
Skips (exit 0, "skip: ...") when the default model is missing or `import openai` fails.
Generations are short (max_tokens <= 16) so that the suite stays well under 2 minutes on 2 cores.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402

try:
    import openai
    _OPENAI_ERROR = None
except Exception as e:  # ImportError or a broken install
    openai = None
    _OPENAI_ERROR = e

BINARY = None
MODEL = serve_util.DEFAULT_MODEL_NAME
PROMPT = "The capital of France is"
PROMPT_IDS = [504, 3575, 282, 4649, 314]  # PROMPT in SmolLM2's tokens
STORY = "Once upon a time, in a small village,"
CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Name three colours."}]
API_KEY = "roofline-test-key-5f2a"

_servers = {}


def skip_reason():
    if _OPENAI_ERROR is not None:
        return "`import openai` failed (%s: %s)" % (type(_OPENAI_ERROR).__name__, _OPENAI_ERROR)
    if not os.path.isfile(serve_util.DEFAULT_MODEL):
        return "the default model %s is not installed" % serve_util.DEFAULT_MODEL
    return None


def setUpModule():
    global BINARY
    reason = skip_reason()
    if reason:
        raise unittest.SkipTest(reason)
    if BINARY is None:
        BINARY = serve_util.binary_from_argv(from_argv=False)
    _servers["main"] = serve_util.start_server(BINARY, [])


def tearDownModule():
    server = _servers.pop("main", None)
    if server is not None:
        server.stop()


def make_client(server, api_key="unused", **kw):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=api_key, max_retries=0, timeout=60, **kw)


class OpenAIClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = _servers["main"]
        cls.client = make_client(cls.server)
        cls._greedy = {}

    def greedy_completion(self, prompt=PROMPT, max_tokens=12):
        key = ("completion", prompt, max_tokens)
        if key not in self._greedy:
            self._greedy[key] = self.client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens,
                                                               temperature=0)
        return self._greedy[key]

    def greedy_chat(self, max_tokens=12):
        key = ("chat", max_tokens)
        if key not in self._greedy:
            self._greedy[key] = self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=max_tokens,
                                                                    temperature=0)
        return self._greedy[key]

    def check_usage(self, usage, max_tokens=None, n=1):
        self.assertGreater(usage.prompt_tokens, 0)
        self.assertGreater(usage.completion_tokens, 0)
        if max_tokens is not None:
            self.assertLessEqual(usage.completion_tokens, n * max_tokens)
        self.assertEqual(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens)

    # ---- the model list ----

    def test_models_list(self):
        models = self.client.models.list()
        ids = [m.id for m in models.data]
        self.assertEqual(ids, [MODEL])
        m = models.data[0]
        self.assertEqual(m.object, "model")
        self.assertIsInstance(m.created, int)
        self.assertEqual(m.owned_by, "roofline")
        self.assertEqual(self.client.models.retrieve(MODEL).id, MODEL)
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("no-such-model")

    # ---- completions ----

    def test_completion(self):
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0)
        self.assertTrue(r.id.startswith("cmpl-"), r.id)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.model, MODEL)
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.index, 0)
        self.assertIsInstance(c.text, str)
        self.assertTrue(c.text.strip(), "empty completion: %r" % c.text)
        self.assertIn(c.finish_reason, ("length", "stop"))
        self.check_usage(r.usage, max_tokens=8)
        if c.finish_reason == "length":
            self.assertEqual(r.usage.completion_tokens, 8)

    def test_completion_default_max_tokens_is_16(self):
        r = self.client.completions.create(model=MODEL, prompt=STORY, temperature=0,
                                           extra_body={"ignore_eos": True})
        self.assertEqual(r.usage.completion_tokens, 16)
        self.assertEqual(r.choices[0].finish_reason, "length")

    def test_completion_stream_equals_greedy(self):
        ref = self.greedy_completion()
        stream = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0,
                                                stream=True, stream_options={"include_usage": True})
        text, finishes, ids, usage, chunks = "", [], set(), None, 0
        for chunk in stream:
            chunks += 1
            ids.add(chunk.id)
            self.assertEqual(chunk.object, "text_completion")
            self.assertEqual(chunk.model, MODEL)
            if chunk.usage is not None:
                self.assertEqual(chunk.choices, [])
                self.assertIsNone(usage, "usage sent twice")
                usage = chunk.usage
                continue
            self.assertIsNone(usage, "a chunk after the usage chunk")
            self.assertEqual(len(chunk.choices), 1)
            c = chunk.choices[0]
            self.assertEqual(c.index, 0)
            self.assertEqual(finishes, [], "a chunk after the finish")
            text += c.text
            if c.finish_reason is not None:
                finishes.append(c.finish_reason)
        self.assertEqual(len(ids), 1, ids)
        self.assertGreater(chunks, 2)
        self.assertEqual(text, ref.choices[0].text)
        self.assertEqual(finishes, [ref.choices[0].finish_reason])
        self.assertIsNotNone(usage, "no usage chunk")
        self.assertEqual(usage.completion_tokens, ref.usage.completion_tokens)
        self.assertEqual(usage.prompt_tokens, ref.usage.prompt_tokens)

    def test_non_ascii_stream(self):
        # Multi-byte characters split across tokens: the stream holds a partial character back
        # until it is whole, so streamed == non-streamed, and no U+FFFD appears -- except possibly
        # as the very last character, when max_tokens cuts a character in two.
        prompt = "Emoji party: \U0001F389\U0001F389 caf\u00e9"
        ref = self.client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
        text = "".join(ch.choices[0].text for ch in self.client.completions.create(
            model=MODEL, prompt=prompt, max_tokens=12, temperature=0, stream=True) if ch.choices)
        self.assertEqual(text, ref.choices[0].text)
        self.assertNotIn("\ufffd", text[:-1], repr(text))

    def test_stream_wire_format(self):
        # What the client hides: "data: " events, one blank line each, the last "data: [DONE]", then close.
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True}
        r = serve_util.raw_request(self.server.port, serve_util.build_request("POST", "/v1/completions", body),
                                   timeout=60)
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.headers.get("content-type"), "text/event-stream")
        self.assertTrue(r.closed, repr(r))
        self.assertTrue(r.body.startswith(b"data: {"), r.body[:100])
        self.assertTrue(r.body.endswith(b"\n\ndata: [DONE]\n\n"), r.body[-100:])
        events = serve_util.sse_events(r.body)
        self.assertEqual(events.count("[DONE]"), 1)
        text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
        self.assertEqual(text, self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4,
                                                              temperature=0).choices[0].text)

    def test_echo(self):
        ref = self.greedy_completion().choices[0].text
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0, echo=True)
        self.assertEqual(r.choices[0].text, PROMPT + ref)
        # The same prompt as token ids (SmolLM2's ids for PROMPT): the prompt comes back as text too.
        r = self.client.completions.create(model=MODEL, prompt=PROMPT_IDS, max_tokens=12, temperature=0)
        if r.choices[0].text != ref or r.usage.prompt_tokens != len(PROMPT_IDS):
            self.skipTest("PROMPT_IDS are not this model's tokens for %r" % PROMPT)
        r = self.client.completions.create(model=MODEL, prompt=PROMPT_IDS, max_tokens=12, temperature=0, echo=True)
        self.assertEqual(r.choices[0].text, PROMPT + ref, "echo with a token-id prompt")

    # ---- chat ----

    def test_chat(self):
        r = self.greedy_chat()
        self.assertTrue(r.id.startswith("chatcmpl-"), r.id)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, MODEL)
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.index, 0)
        self.assertEqual(c.message.role, "assistant")
        self.assertTrue(c.message.content and c.message.content.strip(), repr(c.message.content))
        self.assertIn(c.finish_reason, ("length", "stop"))
        self.check_usage(r.usage, max_tokens=12)
        # The chat template wraps the turns: more prompt tokens than the words in them.
        self.assertGreater(r.usage.prompt_tokens, sum(len(m["content"].split()) for m in CHAT))
        # max_completion_tokens, the newer name of max_tokens.
        r = self.client.chat.completions.create(model=MODEL, messages=CHAT, max_completion_tokens=3, temperature=0)
        self.assertLessEqual(r.usage.completion_tokens, 3)
        self.assertTrue(c.message.content.startswith(r.choices[0].message.content), (c.message.content, r))

    def test_chat_stream_equals_greedy(self):
        ref = self.greedy_chat()
        stream = self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0,
                                                     stream=True, stream_options={"include_usage": True})
        content, roles, finishes, ids, usage = "", [], [], set(), None
        for chunk in stream:
            ids.add(chunk.id)
            self.assertEqual(chunk.object, "chat.completion.chunk")
            if chunk.usage is not None:
                self.assertEqual(chunk.choices, [])
                usage = chunk.usage
                continue
            self.assertEqual(len(chunk.choices), 1)
            c = chunk.choices[0]
            self.assertEqual(c.index, 0)
            if c.delta.role is not None:
                roles.append(c.delta.role)
            content += c.delta.content or ""
            if c.finish_reason is not None:
                finishes.append(c.finish_reason)
        self.assertEqual(len(ids), 1, ids)
        self.assertEqual(roles, ["assistant"])
        self.assertEqual(content, ref.choices[0].message.content)
        self.assertEqual(finishes, [ref.choices[0].finish_reason])
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, ref.usage.completion_tokens)
        self.assertEqual(usage.prompt_tokens, ref.usage.prompt_tokens)

    # ---- n, stop, seed ----

    def test_n_choices(self):
        r = self.client.completions.create(model=MODEL, prompt=STORY, max_tokens=6, temperature=0.8, seed=11, n=3)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2])
        for c in r.choices:
            self.assertIsInstance(c.text, str)
            self.assertIn(c.finish_reason, ("length", "stop"))
        self.check_usage(r.usage, max_tokens=6, n=3)
        r = self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=6, temperature=0.8, seed=11, n=3)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2])
        for c in r.choices:
            self.assertEqual(c.message.role, "assistant")
            self.assertIsInstance(c.message.content, str)
        self.check_usage(r.usage, max_tokens=6, n=3)
        # Streamed: each of the three choices finishes exactly once.
        stream = self.client.completions.create(model=MODEL, prompt=STORY, max_tokens=4, temperature=0.8, seed=11,
                                                n=3, stream=True)
        finished = {}
        for chunk in stream:
            for c in chunk.choices:
                self.assertIn(c.index, (0, 1, 2))
                self.assertNotIn(c.index, finished, "a chunk for choice %d after its finish" % c.index)
                if c.finish_reason is not None:
                    finished[c.index] = c.finish_reason
        self.assertEqual(sorted(finished), [0, 1, 2])

    def stop_string(self, text):
        """A short piece of a word from the middle of `text` that first occurs past its start."""
        words = text.split()
        for word in words[len(words) // 2:] + words[:len(words) // 2]:
            piece = word[:4]
            if text.find(piece) > 0:
                return piece
        self.skipTest("no usable stop string in %r" % text)

    def test_stop_strings(self):
        ref = self.greedy_completion(max_tokens=16).choices[0].text
        stop = self.stop_string(ref)
        expected = ref[:ref.find(stop)]
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0, stop=[stop])
        c = r.choices[0]
        self.assertNotIn(stop, c.text)
        self.assertEqual(c.finish_reason, "stop", "stop %r in %r: got %r" % (stop, ref, c.text))
        self.assertEqual(c.text, expected, "stop %r in %r" % (stop, ref))
        # A stop string that never appears changes nothing; one of several that does, stops.
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0,
                                           stop=["\u2603never\u2603", stop])
        self.assertEqual(r.choices[0].text, expected)
        # Streamed: no piece of the stop string leaks into the chunks.
        stream = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0, stop=stop,
                                                stream=True)
        text, finishes = "", []
        for chunk in stream:
            for ch in chunk.choices:
                text += ch.text
                if ch.finish_reason is not None:
                    finishes.append(ch.finish_reason)
        self.assertEqual(text, expected)
        self.assertEqual(finishes, ["stop"])

    def test_chat_stop_string(self):
        ref = self.greedy_chat().choices[0].message.content
        stop = self.stop_string(ref)
        r = self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0, stop=stop)
        self.assertNotIn(stop, r.choices[0].message.content)
        self.assertEqual(r.choices[0].message.content, ref[:ref.find(stop)])
        self.assertEqual(r.choices[0].finish_reason, "stop")

    def test_seed_reproducible(self):
        def sample(seed, n=1):
            r = self.client.completions.create(model=MODEL, prompt=STORY, max_tokens=12, temperature=0.8, seed=seed,
                                               n=n)
            return [c.text for c in sorted(r.choices, key=lambda c: c.index)]

        a = sample(1234)[0]
        b = sample(1234)[0]
        self.assertEqual(a, b, "the same seed gave different text")
        others = [sample(s)[0] for s in (1, 2)]
        self.assertTrue(any(o != a for o in others), "seeds 1234, 1, 2 all gave %r" % a)
        # Choice i of n uses seed + i.
        pair = sample(1, n=2)
        self.assertEqual(pair, [others[0], others[1]], "n=2 with seed 1 vs seeds 1 and 2 alone")

    # ---- errors ----

    def test_unknown_model_is_404(self):
        with self.assertRaises(openai.NotFoundError) as cm:
            self.client.completions.create(model="no-such-model", prompt=PROMPT, max_tokens=1)
        self.assertEqual(cm.exception.status_code, 404)
        self.assertEqual(cm.exception.body.get("type"), "not_found_error")
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="gpt-4o", messages=CHAT, max_tokens=1)

    def test_bad_requests_are_400(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=-1)
        self.assertEqual(cm.exception.status_code, 400)
        self.assertEqual(cm.exception.body.get("param"), "max_tokens")
        self.assertEqual(cm.exception.body.get("type"), "invalid_request_error")
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=9000)
        self.assertIn("8192", cm.exception.body.get("message", ""))
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=4, temperature=3)
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(
                model=MODEL, messages=CHAT, max_tokens=4,
                tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, logit_bias={"1": 500})
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, n=17)


class ApiKeyTest(unittest.TestCase):
    """A second server with --api-key: every endpoint but /health needs the key."""

    @classmethod
    def setUpClass(cls):
        cls.server = serve_util.start_server(BINARY, ["--api-key", API_KEY])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_without_key(self):
        client = make_client(self.server, api_key="placeholder")
        with self.assertRaises(openai.AuthenticationError) as cm:
            # No Authorization header at all.
            client.models.list(extra_headers={"Authorization": openai.Omit()})
        self.assertEqual(cm.exception.status_code, 401)
        with self.assertRaises(openai.AuthenticationError):
            client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1,
                                      extra_headers={"Authorization": openai.Omit()})

    def test_wrong_key(self):
        client = make_client(self.server, api_key="wrong-" + API_KEY)
        with self.assertRaises(openai.AuthenticationError) as cm:
            client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1)
        self.assertEqual(cm.exception.status_code, 401)
        self.assertEqual(cm.exception.body.get("type"), "authentication_error")
        self.assertNotIn(API_KEY, json.dumps(cm.exception.body))
        with self.assertRaises(openai.AuthenticationError):
            make_client(self.server, api_key=API_KEY + "x").models.list()

    def test_with_key(self):
        client = make_client(self.server, api_key=API_KEY)
        self.assertEqual([m.id for m in client.models.list().data], [MODEL])
        r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, temperature=0)
        self.assertEqual(r.usage.completion_tokens, 2)

    def test_health_and_metrics(self):
        status, _, body, _ = serve_util.http_json(self.server.port, "GET", "/health")
        self.assertEqual((status, body), (200, {"status": "ok"}))
        status, _, body, _ = serve_util.http_json(self.server.port, "GET", "/metrics")
        self.assertEqual(status, 401)
        m = serve_util.metrics(self.server.port, headers={"Authorization": "Bearer " + API_KEY})
        self.assertIn("roofline_kv_cache_blocks_total", m)


if __name__ == "__main__":
    reason = skip_reason()
    if reason:
        print("skip: " + reason)
        sys.exit(0)
    BINARY = serve_util.binary_from_argv()
    unittest.main(verbosity=2)
