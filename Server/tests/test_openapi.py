from __future__ import annotations

import json
from pathlib import Path

from symorva_server.openapi_export import openapi_document, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "community-services.openapi.json"


def test_checked_in_document_is_up_to_date():
    assert DOC.exists(), "run Scripts/export-openapi"
    assert DOC.read_text(encoding="utf-8") == render(), "run Scripts/export-openapi and commit the result"


def test_document_describes_the_error_format():
    doc = openapi_document()
    assert "HTTPValidationError" not in json.dumps(doc)
    ids = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            ids.add(op["operationId"])
            for status, resp in op["responses"].items():
                assert status != "422", (method, path)
                if status.startswith(("4", "5")):
                    ref = resp["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/ErrorBody", (method, path, status)
            public = path in ("/_symorva/v1/health", "/.well-known/symorva", "/_symorva/v1/auth/openid",
                          "/_matrix/push/v1/notify")
            assert ("security" in op) != public, (method, path)
    assert {"exchange_openid", "whoami", "capabilities", "health", "discovery", "add_fault"} <= ids
