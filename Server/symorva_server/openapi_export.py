"""python -m symorva_server.openapi_export [OUT]

Prints (or writes to OUT) the OpenAPI document of the community services API,
deterministically: sorted keys, 2-space indent, trailing newline. The document
includes the `testing` endpoints (present only when the server runs with --test).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile


def openapi_document() -> dict:
    from .app import create_app
    from .config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            homeserver_url="http://127.0.0.1:8008",
            server_name="localhost",
            db_path=os.path.join(tmp, "openapi.db"),
            test_mode=True,
        )
        app = create_app(settings)
        try:
            return app.openapi()
        finally:
            app.state.ctx.db.close()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        with open(argv[0], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
