// The JSON Schemas of every method's params and result and every path's params and value, read
// from contract/symorva.d.ts with the TypeScript compiler's type checker (Debian's
// node-typescript) — for Scripts/contract-schema, which writes them into
// contract/symorva.schema.json. Prints {"types", "methods", "paths"} as JSON on standard output.
//
// The schemas use a small set of keywords (type, const, enum, properties, required,
// additionalProperties, maxProperties, items, anyOf, allOf, $ref), which
// clients/python/symorva/schema.py validates. Named exported types become `$defs` (referenced
// as `#/$defs/types/<Name>`); generic instances are written out. An optional property also takes
// `null` (the protocol reads a null parameter as absent, and the SDK may write absent values as
// null).
"use strict";

const path = require("path");
let ts;
try {
  ts = require("typescript");
} catch {
  ts = require("/usr/share/nodejs/typescript");
}

const file = path.resolve(process.argv[2]);
const program = ts.createProgram([file], { strict: true, noEmit: true });
const checker = program.getTypeChecker();
const source = program.getSourceFile(file);
const exported = new Map();
for (const statement of source.statements) {
  if ((ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement)) && statement.name) {
    exported.set(statement.name.text, statement);
  }
}

const types = {};
const building = new Set();

function fail(message, node) {
  throw new Error(`contract-types: ${message}${node ? ` (${node})` : ""}`);
}

// A reference to a named non-generic type of the file, converting it once.
function named(type) {
  const alias = type.aliasSymbol;
  if (alias && !type.aliasTypeArguments && exported.has(alias.name)) return alias.name;
  const symbol = type.getSymbol();
  if (symbol && !alias && exported.has(symbol.name) && ts.isInterfaceDeclaration(exported.get(symbol.name))) {
    const declaration = exported.get(symbol.name);
    if (!declaration.typeParameters && (type.objectFlags & ts.ObjectFlags.Reference) === 0) return symbol.name;
    if (!declaration.typeParameters) return symbol.name;
  }
  return null;
}

function convert(type, where) {
  const name = named(type);
  if (name) {
    if (!(name in types) && !building.has(name)) {
      building.add(name);
      types[name] = inline(type, name);
      building.delete(name);
    }
    return { $ref: `#/$defs/types/${name}` };
  }
  return inline(type, where);
}

function withNull(schema) {
  return { anyOf: [schema, { type: "null" }] };
}

function inline(type, where) {
  const flags = type.flags;
  if (flags & ts.TypeFlags.Any || flags & ts.TypeFlags.Unknown) return {};
  if (flags & ts.TypeFlags.String) return { type: "string" };
  if (flags & ts.TypeFlags.Number) return { type: "number" };
  if (flags & ts.TypeFlags.Boolean) return { type: "boolean" };
  if (flags & ts.TypeFlags.Null) return { type: "null" };
  if (flags & ts.TypeFlags.Never) return { not: {} };
  if (flags & ts.TypeFlags.StringLiteral || flags & ts.TypeFlags.NumberLiteral) return { const: type.value };
  if (flags & ts.TypeFlags.BooleanLiteral) return { const: checker.typeToString(type) === "true" };
  if (type.isUnion()) {
    let members = type.types.filter((member) => !(member.flags & ts.TypeFlags.Undefined));
    // TypeScript splits `boolean` into `true | false`.
    const booleans = members.filter((member) => member.flags & ts.TypeFlags.BooleanLiteral);
    const rest = members.filter((member) => !(member.flags & ts.TypeFlags.BooleanLiteral));
    const schemas = rest.map((member) => convert(member, where));
    if (booleans.length === 2) schemas.push({ type: "boolean" });
    else if (booleans.length === 1) schemas.push(inline(booleans[0], where));
    if (schemas.length === 1) return schemas[0];
    if (schemas.every((schema) => "const" in schema)) return { enum: schemas.map((schema) => schema.const) };
    return { anyOf: schemas };
  }
  if (type.isIntersection()) return { allOf: type.types.map((member) => convert(member, where)) };
  if (checker.isArrayType(type)) {
    return { type: "array", items: convert(checker.getTypeArguments(type)[0], where) };
  }
  if (flags & ts.TypeFlags.Object) {
    if (type.getCallSignatures().length > 0) fail(`a function type in the wire types`, where);
    const schema = { type: "object" };
    const properties = {};
    const required = [];
    for (const property of checker.getPropertiesOfType(type)) {
      const declaration = property.valueDeclaration || property.declarations?.[0];
      const propertyType = checker.getTypeOfSymbolAtLocation(property, declaration || source);
      const optional = (property.flags & ts.SymbolFlags.Optional) !== 0;
      const converted = convert(propertyType, `${where}.${property.name}`);
      properties[property.name] = optional ? withNull(converted) : converted;
      if (!optional) required.push(property.name);
    }
    if (Object.keys(properties).length > 0) schema.properties = properties;
    if (required.length > 0) schema.required = required;
    const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
    if (index) {
      if (index.type.flags & ts.TypeFlags.Never) schema.maxProperties = 0;
      else schema.additionalProperties = convert(index.type, `${where}[string]`);
    }
    return schema;
  }
  fail(`type ${checker.typeToString(type)} has no JSON Schema here`, where);
}

function members(interfaceName, keys) {
  const declaration = exported.get(interfaceName);
  if (!declaration || !ts.isInterfaceDeclaration(declaration)) fail(`no interface ${interfaceName}`);
  const type = checker.getTypeAtLocation(declaration);
  const result = {};
  for (const property of checker.getPropertiesOfType(type)) {
    const entry = checker.getTypeOfSymbolAtLocation(property, property.valueDeclaration);
    result[property.name] = {};
    for (const key of keys) {
      const member = entry.getProperty(key);
      if (!member) fail(`${interfaceName}["${property.name}"] has no ${key}`);
      result[property.name][key] = convert(
        checker.getTypeOfSymbolAtLocation(member, member.valueDeclaration), `${property.name}.${key}`);
    }
  }
  return result;
}

const methods = members("Methods", ["params", "result"]);
const paths = members("Paths", ["params", "value"]);
convert(checker.getTypeAtLocation(exported.get("ContractError")), "ContractError");
const sorted = (object) => Object.fromEntries(Object.keys(object).sort().map((key) => [key, object[key]]));
process.stdout.write(JSON.stringify({ types: sorted(types), methods: sorted(methods), paths: sorted(paths) }));
