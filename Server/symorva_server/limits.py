"""Request body size limit: bodies over the limit get 413 SY_TOO_LARGE.

Checked from Content-Length up front and, for chunked bodies, while reading: the body
is buffered (it is small by definition) and replayed to the application, so a
handler never sees a partial body.
"""

from __future__ import annotations

from .errors import ErrorCode, send_raw_error


class BodySizeLimitMiddleware:
    def __init__(self, app, max_body_bytes: int, overrides: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        # path prefix -> limit, for future upload endpoints that need more.
        self.overrides = dict(sorted((overrides or {}).items(), key=lambda kv: -len(kv[0])))

    def limit_for(self, path: str) -> int:
        for prefix, limit in self.overrides.items():
            if path.startswith(prefix):
                return limit
        return self.max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        too_large = f"Request body is larger than the limit of {limit} bytes"
        for k, v in scope.get("headers", []):
            if k.lower() == b"content-length":
                try:
                    declared = int(v)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await send_raw_error(send, 413, ErrorCode.TOO_LARGE, too_large,
                                         [(b"connection", b"close")])
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await send_raw_error(send, 413, ErrorCode.TOO_LARGE, too_large,
                                     [(b"connection", b"close")])
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        buffered = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": buffered, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
