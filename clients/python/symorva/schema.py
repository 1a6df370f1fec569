"""Validates the contract's messages against contract/symorva.schema.json (the JSON Schema
generated from contract/symorva.d.ts by Scripts/contract-schema), with the standard library only.

It reads the keywords the generator writes (type, const, enum, properties, required,
additionalProperties, maxProperties, items, anyOf, allOf, oneOf, not, $ref, and the annotations
$schema, $id, title, description, maxLength) and refuses a schema with any other, so that a
keyword it would skip cannot pass unnoticed.

    schema = Schema.load(path)
    schema.check_params("chat.kick", {"roomID": "!a:b", "userID": "@c:d"})   # raises SchemaViolation
    schema.check_result("chat.kick", {})
    schema.check_value("session.state", {"kind": "signedOut"})
    schema.check_message(message)                                           # any message from the SDK
"""

import json
from pathlib import Path

KNOWN = {"type", "const", "enum", "properties", "required", "additionalProperties", "maxProperties", "items",
         "anyOf", "allOf", "oneOf", "not", "$ref"}
ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs", "maxLength"}


class SchemaViolation(Exception):
    """A value the schema does not accept; `where` is a JSON pointer into the value."""

    def __init__(self, where, message):
        super().__init__(f"{where or '/'}: {message}")
        self.where = where


def _type_ok(value, name):
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and value.is_integer())
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    raise SchemaViolation("", f"unknown type {name!r} in the schema")


class Schema:
    def __init__(self, document):
        self.document = document
        self._check_keywords(document, "#")

    @classmethod
    def load(cls, path=None):
        if path is None:
            path = Path(__file__).resolve().parents[3] / "contract" / "symorva.schema.json"
        return cls(json.loads(Path(path).read_text()))

    def _check_keywords(self, schema, where):
        if not isinstance(schema, dict):
            raise ValueError(f"{where}: a schema must be an object")
        for key, value in schema.items():
            if key not in KNOWN and key not in ANNOTATIONS:
                raise ValueError(f"{where}: the validator does not read the keyword {key!r}")
            if key == "$defs":
                self._check_defs(value, f"{where}/$defs")
            elif key in ("properties",):
                for name, member in value.items():
                    self._check_keywords(member, f"{where}/properties/{name}")
            elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
                self._check_keywords(value, f"{where}/{key}")
            elif key in ("anyOf", "allOf", "oneOf"):
                for index, member in enumerate(value):
                    self._check_keywords(member, f"{where}/{key}/{index}")

    def _check_defs(self, defs, where):
        for name, value in defs.items():
            # A def is a schema, or a group of schemas (types, methods, paths).
            if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) and not (
                    set(value) & (KNOWN | ANNOTATIONS)):
                self._check_defs(value, f"{where}/{name}")
            else:
                self._check_keywords(value, f"{where}/{name}")

    def resolve(self, reference):
        if not reference.startswith("#/"):
            raise ValueError(f"only local references: {reference}")
        node = self.document
        for part in reference[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def validate(self, value, schema, where=""):
        """Raises SchemaViolation unless `schema` accepts `value`."""
        if "$ref" in schema:
            self.validate(value, self.resolve(schema["$ref"]), where)
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_type_ok(value, name) for name in names):
                raise SchemaViolation(where, f"{type(value).__name__} is not {'/'.join(names)}")
        if "const" in schema and not _equal(value, schema["const"]):
            raise SchemaViolation(where, f"{value!r} is not {schema['const']!r}")
        if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
            raise SchemaViolation(where, f"{value!r} is not one of {schema['enum']!r}")
        if "maxLength" in schema and isinstance(value, str) and len(value) > schema["maxLength"]:
            raise SchemaViolation(where, f"longer than {schema['maxLength']}")
        if isinstance(value, dict):
            if "maxProperties" in schema and len(value) > schema["maxProperties"]:
                raise SchemaViolation(where, f"more than {schema['maxProperties']} members")
            for name in schema.get("required", []):
                if name not in value:
                    raise SchemaViolation(where, f"no member {name!r}")
            properties = schema.get("properties", {})
            for name, member in value.items():
                if name in properties:
                    self.validate(member, properties[name], f"{where}/{name}")
                elif isinstance(schema.get("additionalProperties"), dict):
                    self.validate(member, schema["additionalProperties"], f"{where}/{name}")
                elif schema.get("additionalProperties") is False:
                    raise SchemaViolation(where, f"unexpected member {name!r}")
        if isinstance(value, list) and "items" in schema:
            for index, item in enumerate(value):
                self.validate(item, schema["items"], f"{where}/{index}")
        if "allOf" in schema:
            for member in schema["allOf"]:
                self.validate(value, member, where)
        if "anyOf" in schema:
            errors = []
            for member in schema["anyOf"]:
                try:
                    self.validate(value, member, where)
                    break
                except SchemaViolation as error:
                    errors.append(str(error))
            else:
                raise SchemaViolation(where, "no alternative accepts it: " + " | ".join(errors))
        if "oneOf" in schema:
            matched = 0
            for member in schema["oneOf"]:
                try:
                    self.validate(value, member, where)
                    matched += 1
                except SchemaViolation:
                    pass
            if matched != 1:
                raise SchemaViolation(where, f"{matched} alternatives of a oneOf accept it, not 1")
        if "not" in schema:
            try:
                self.validate(value, schema["not"], where)
            except SchemaViolation:
                pass
            else:
                raise SchemaViolation(where, "accepted by a `not`")

    def _entry(self, group, name):
        entries = self.document["$defs"][group]
        if name not in entries:
            raise SchemaViolation("", f"no {group} entry {name!r} in the schema")
        return entries[name]

    def check_params(self, method, params):
        self.validate(params, self._entry("methods", method)["params"], f"{method}.params")

    def check_result(self, method, result):
        self.validate(result, self._entry("methods", method)["result"], f"{method}.result")

    def check_path_params(self, path, params):
        self.validate(params, self._entry("paths", path)["params"], f"{path}.params")

    def check_value(self, path, value):
        self.validate(value, self._entry("paths", path)["value"], f"{path}.value")

    def check_message(self, message):
        self.validate(message, self.document["$defs"]["message"], "message")


def _equal(left, right):
    return type(left) is type(right) and left == right or (
        isinstance(left, (int, float)) and isinstance(right, (int, float))
        and not isinstance(left, bool) and not isinstance(right, bool) and left == right)
