"""Summarizers: the offline extractive one (sumy) and an OpenAI-compatible backend.

A summarizer gets the items of one request (already checked against the grant) and returns
points, each citing the event IDs it was drawn from. It keeps nothing.

- `ExtractiveSummarizer` (default): sumy's LexRank or TextRank over the messages, one message
  per sentence, so that every point cites exactly the message it was extracted from. It needs
  no downloaded data: sumy's own stop-word lists ship inside the package, the Snowball stemmer
  is algorithmic, and the word tokenizer below is a regular expression (sumy's default one
  would need NLTK's punkt data, which is a download).
- `OpenAICompatibleSummarizer`: `POST {url}/chat/completions` of any OpenAI-compatible endpoint
  (manifest `modules.aiStudio.summarizer: {"backend": "openai", "url", "model", "apiKeyEnv"}`).
  Selectable by configuration; the test suites do not exercise it against a model.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

DEFAULT_MAX_POINTS = 5


@dataclass(frozen=True)
class Item:
    event_id: str
    sender: str
    timestamp: int
    body: str


@dataclass(frozen=True)
class Point:
    text: str
    event_ids: tuple[str, ...]


class SummarizerError(Exception):
    """The summarizer could not produce a summary (the backend failed or answered nonsense)."""


class Summarizer(Protocol):
    name: str

    def summarize(self, items: list[Item], max_points: int) -> list[Point]:
        """Points in conversation order, each citing event IDs among `items`."""
        ...


class _WordTokenizer:
    """What sumy's `Sentence` needs: words of a sentence. A message is one sentence."""

    language = "english"
    _WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

    def to_words(self, text: str) -> list[str]:
        return self._WORD.findall(text)

    def to_sentences(self, text: str) -> list[str]:
        return [text]


class ExtractiveSummarizer:
    """sumy's LexRank (default) or TextRank, fully offline."""

    def __init__(self, algorithm: str = "lexrank", language: str = "english") -> None:
        from sumy.nlp.stemmers import Stemmer
        from sumy.summarizers.lex_rank import LexRankSummarizer
        from sumy.summarizers.text_rank import TextRankSummarizer
        from sumy.utils import get_stop_words

        classes = {"lexrank": LexRankSummarizer, "textrank": TextRankSummarizer}
        if algorithm not in classes:
            raise ValueError(f"unknown extractive algorithm {algorithm!r} (lexrank or textrank)")
        self.name = f"extractive-{algorithm}"
        self._summarizer = classes[algorithm](Stemmer(language))
        self._summarizer.stop_words = get_stop_words(language)
        self._tokenizer = _WordTokenizer()

    def summarize(self, items: list[Item], max_points: int) -> list[Point]:
        from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence

        ordered = sorted(items, key=lambda i: (i.timestamp, i.event_id))
        if len(ordered) <= max_points:
            return [Point(i.body, (i.event_id,)) for i in ordered]
        sentences = [Sentence(i.body, self._tokenizer) for i in ordered]
        by_identity = {id(s): item for s, item in zip(sentences, ordered, strict=True)}
        document = ObjectDocumentModel([Paragraph(sentences)])
        try:
            chosen = self._summarizer(document, max_points)
        except Exception as e:  # sumy raises plain errors on degenerate input (e.g. no words)
            raise SummarizerError(f"{self.name} failed: {type(e).__name__}") from e
        picked = [by_identity[id(s)] for s in chosen if id(s) in by_identity]
        if not picked:  # every message was stop words only: fall back to the first ones
            picked = ordered[:max_points]
        picked.sort(key=lambda i: (i.timestamp, i.event_id))
        return [Point(i.body, (i.event_id,)) for i in picked]


class OpenAICompatibleSummarizer:
    """Asks a chat-completions endpoint for cited points. Bodies go to that endpoint only."""

    def __init__(self, url: str, model: str, api_key_env: str | None = None, timeout_s: float = 60.0) -> None:
        self.name = f"openai-compatible:{model}"
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s

    def request_body(self, items: list[Item], max_points: int) -> dict[str, Any]:
        lines = "\n".join(f"[{i.event_id}] {i.sender}: {i.body}" for i in items)
        return {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": (
                    f"Summarize the conversation in at most {max_points} points. Answer JSON: "
                    '{"points": [{"text": "...", "event_ids": ["$..."]}]}, citing for every point '
                    "the IDs of the messages it draws from, and nothing else.")},
                {"role": "user", "content": lines},
            ],
        }

    def parse(self, answer: Any, items: list[Item], max_points: int) -> list[Point]:
        known = {i.event_id for i in items}
        try:
            content = answer["choices"][0]["message"]["content"]
            points = json.loads(content)["points"]
            out = [Point(str(p["text"]), tuple(str(e) for e in p["event_ids"])) for p in points][:max_points]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise SummarizerError("the language model's answer is not the expected JSON") from e
        if not out or any(not p.event_ids or not set(p.event_ids) <= known for p in out):
            raise SummarizerError("the language model cited messages that were not given to it")
        return out

    def summarize(self, items: list[Item], max_points: int) -> list[Point]:
        headers = {}
        if self.api_key_env and os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        try:
            with httpx.Client(timeout=self.timeout_s, trust_env=False) as client:
                resp = client.post(self.url, json=self.request_body(items, max_points), headers=headers)
        except httpx.HTTPError as e:
            raise SummarizerError(f"language model endpoint not reachable: {type(e).__name__}") from e
        if resp.status_code != 200:
            raise SummarizerError(f"language model endpoint answered {resp.status_code}")
        try:
            answer = resp.json()
        except ValueError as e:
            raise SummarizerError("language model endpoint answered no JSON") from e
        return self.parse(answer, items, max_points)


def create_summarizer(options: dict[str, Any]) -> Summarizer:
    """From the manifest's `modules.aiStudio.summarizer` (validated by studio config)."""
    backend = options.get("backend", "extractive")
    if backend == "openai":
        return OpenAICompatibleSummarizer(options["url"], options["model"], options.get("apiKeyEnv"))
    return ExtractiveSummarizer(options.get("algorithm", "lexrank"), options.get("language", "english"))
