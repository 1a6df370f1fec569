"use strict";
// Validates the contract's messages against contract/symorva.schema.json (generated from
// contract/symorva.d.ts by Scripts/contract-schema), with Node's standard library only — the
// same rules as the Python client's symorva/schema.py. It reads the keywords the generator
// writes (type, const, enum, properties, required, additionalProperties, maxProperties, items,
// anyOf, allOf, oneOf, not, $ref; the annotations $schema, $id, title, description, maxLength)
// and refuses a schema with any other, so that a keyword it would skip cannot pass unnoticed.
//
//   const schema = Schema.load();
//   schema.checkParams("chat.kick", { roomID: "!a:b", userID: "@c:d" });   // throws SchemaViolation
//   schema.checkResult("chat.kick", {});
//   schema.checkValue("session.state", { kind: "signedOut" });
//   schema.checkMessage(message);                                          // any message from the SDK
const fs = require("node:fs");
const path = require("node:path");

const KNOWN = new Set(["type", "const", "enum", "properties", "required", "additionalProperties", "maxProperties",
  "items", "anyOf", "allOf", "oneOf", "not", "$ref"]);
const ANNOTATIONS = new Set(["$schema", "$id", "title", "description", "$defs", "maxLength"]);

/** A value the schema does not accept; `where` is a pointer into the value. */
class SchemaViolation extends Error {
  constructor(where, message) {
    super(`${where || "/"}: ${message}`);
    this.name = "SchemaViolation";
    this.where = where;
  }
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

function typeOK(value, name) {
  switch (name) {
    case "object": return isObject(value);
    case "array": return Array.isArray(value);
    case "string": return typeof value === "string";
    case "number": return typeof value === "number";
    case "integer": return Number.isInteger(value);
    case "boolean": return typeof value === "boolean";
    case "null": return value === null;
    default: throw new SchemaViolation("", `unknown type ${JSON.stringify(name)} in the schema`);
  }
}

function equal(left, right) {
  if (left === right) return true;
  if (Array.isArray(left) || Array.isArray(right)) {
    return Array.isArray(left) && Array.isArray(right) && left.length === right.length
      && left.every((item, index) => equal(item, right[index]));
  }
  if (isObject(left) && isObject(right)) {
    const keys = Object.keys(left);
    return keys.length === Object.keys(right).length && keys.every((key) => key in right && equal(left[key], right[key]));
  }
  return false;
}

const describe = (value) => (value === null ? "null" : Array.isArray(value) ? "array" : typeof value);

class Schema {
  constructor(document) {
    this.document = document;
    this._checkKeywords(document, "#");
  }

  /** The schema at `file` (default: the repository's contract/symorva.schema.json). */
  static load(file = path.join(__dirname, "..", "..", "contract", "symorva.schema.json")) {
    return new Schema(JSON.parse(fs.readFileSync(file, "utf8")));
  }

  _checkKeywords(schema, where) {
    if (!isObject(schema)) throw new Error(`${where}: a schema must be an object`);
    for (const [key, value] of Object.entries(schema)) {
      if (!KNOWN.has(key) && !ANNOTATIONS.has(key)) throw new Error(`${where}: the validator does not read the keyword ${key}`);
      if (key === "$defs") this._checkDefs(value, `${where}/$defs`);
      else if (key === "properties") {
        for (const [name, member] of Object.entries(value)) this._checkKeywords(member, `${where}/properties/${name}`);
      } else if ((key === "items" || key === "additionalProperties" || key === "not") && isObject(value)) {
        this._checkKeywords(value, `${where}/${key}`);
      } else if (key === "anyOf" || key === "allOf" || key === "oneOf") {
        value.forEach((member, index) => this._checkKeywords(member, `${where}/${key}/${index}`));
      }
    }
  }

  _checkDefs(defs, where) {
    for (const [name, value] of Object.entries(defs)) {
      // A def is a schema, or a group of schemas (types, methods, paths).
      const entries = isObject(value) ? Object.entries(value) : [];
      const isGroup = entries.length > 0 && entries.every(([, member]) => isObject(member))
        && !entries.some(([key]) => KNOWN.has(key) || ANNOTATIONS.has(key));
      if (isGroup) this._checkDefs(value, `${where}/${name}`);
      else this._checkKeywords(value, `${where}/${name}`);
    }
  }

  resolve(reference) {
    if (!reference.startsWith("#/")) throw new Error(`only local references: ${reference}`);
    let node = this.document;
    for (const part of reference.slice(2).split("/")) node = node[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    return node;
  }

  /** Throws a SchemaViolation unless `schema` accepts `value`. */
  validate(value, schema, where = "") {
    if ("$ref" in schema) this.validate(value, this.resolve(schema.$ref), where);
    if ("type" in schema) {
      const names = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!names.some((name) => typeOK(value, name))) throw new SchemaViolation(where, `${describe(value)} is not ${names.join("/")}`);
    }
    if ("const" in schema && !equal(value, schema.const)) {
      throw new SchemaViolation(where, `${JSON.stringify(value)} is not ${JSON.stringify(schema.const)}`);
    }
    if ("enum" in schema && !schema.enum.some((option) => equal(value, option))) {
      throw new SchemaViolation(where, `${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
    }
    if ("maxLength" in schema && typeof value === "string" && [...value].length > schema.maxLength) {
      throw new SchemaViolation(where, `longer than ${schema.maxLength}`);
    }
    if (isObject(value)) {
      const names = Object.keys(value);
      if ("maxProperties" in schema && names.length > schema.maxProperties) {
        throw new SchemaViolation(where, `more than ${schema.maxProperties} members`);
      }
      for (const name of schema.required || []) {
        if (!(name in value)) throw new SchemaViolation(where, `no member ${JSON.stringify(name)}`);
      }
      const properties = schema.properties || {};
      for (const name of names) {
        if (Object.prototype.hasOwnProperty.call(properties, name)) this.validate(value[name], properties[name], `${where}/${name}`);
        else if (isObject(schema.additionalProperties)) this.validate(value[name], schema.additionalProperties, `${where}/${name}`);
        else if (schema.additionalProperties === false) throw new SchemaViolation(where, `unexpected member ${JSON.stringify(name)}`);
      }
    }
    if (Array.isArray(value) && "items" in schema) {
      value.forEach((item, index) => this.validate(item, schema.items, `${where}/${index}`));
    }
    for (const member of schema.allOf || []) this.validate(value, member, where);
    if ("anyOf" in schema) {
      const errors = [];
      const accepted = schema.anyOf.some((member) => {
        try {
          this.validate(value, member, where);
          return true;
        } catch (error) {
          if (!(error instanceof SchemaViolation)) throw error;
          errors.push(error.message);
          return false;
        }
      });
      if (!accepted) throw new SchemaViolation(where, `no alternative accepts it: ${errors.join(" | ")}`);
    }
    if ("oneOf" in schema) {
      const matched = schema.oneOf.filter((member) => this._accepts(value, member, where)).length;
      if (matched !== 1) throw new SchemaViolation(where, `${matched} alternatives of a oneOf accept it, not 1`);
    }
    if ("not" in schema && this._accepts(value, schema.not, where)) throw new SchemaViolation(where, "accepted by a `not`");
  }

  _accepts(value, schema, where) {
    try {
      this.validate(value, schema, where);
      return true;
    } catch (error) {
      if (!(error instanceof SchemaViolation)) throw error;
      return false;
    }
  }

  _entry(group, name) {
    const entries = this.document.$defs[group];
    if (!Object.prototype.hasOwnProperty.call(entries, name)) throw new SchemaViolation("", `no ${group} entry ${JSON.stringify(name)} in the schema`);
    return entries[name];
  }

  checkParams(method, params) { this.validate(params, this._entry("methods", method).params, `${method}.params`); }
  checkResult(method, result) { this.validate(result, this._entry("methods", method).result, `${method}.result`); }
  checkPathParams(name, params) { this.validate(params, this._entry("paths", name).params, `${name}.params`); }
  checkValue(name, value) { this.validate(value, this._entry("paths", name).value, `${name}.value`); }
  checkMessage(message) { this.validate(message, this.document.$defs.message, "message"); }
}

module.exports = { Schema, SchemaViolation };
