// Validates deploy/kubernetes (or the directory named as the argument) offline,
// as `kubectl apply -k` would see it:
//
//   node validate.mjs [DIR]
//
// - kustomization.yaml: only the fields it uses (a misspelled one is an
//   error, not ignored as kustomize's strict decoding would refuse it too);
//   every resource exists, every other *.yaml of DIR is a resource, every
//   file a configMapGenerator names exists.
// - Every resource is parsed with YAML 1.1 semantics (Kubernetes' parser:
//   0400 is octal), and any warning or error, a duplicate key included, fails.
// - Every object, and each ConfigMap the generator makes, is validated
//   against its schema from kubernetes-models, and every key it holds must be
//   one the schema knows.  The compiled validators read only the properties
//   they know, so each object is wrapped in Proxies that record what the
//   validator reads, and which objects it enumerates (maps: labels, a
//   ConfigMap's data); a key of any other object that it never read is
//   unknown to Kubernetes (kubectl's server-side field validation rejects
//   it; an older client silently drops it).
//
// On success prints one JSON line per object, {"file", "object"}, the
// Kustomization first, the generated ConfigMaps last, for
// tests/kubernetes/test_manifests.py, and exits 0.  On any error prints
// "FILE: KIND/NAME: PATH: what" lines on stderr and exits 1 (2: usage).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DIR = path.resolve(process.argv[2] ?? path.join(HERE, "..", "..", "deploy", "kubernetes"));
if (process.argv.length > 3) {
  console.error("usage: node validate.mjs [DIR]");
  process.exit(2);
}

// DIR/FILE as messages name it: relative to the working directory when below it.
function shown(file) {
  const rel = path.relative(process.cwd(), path.join(DIR, file));
  return rel.startsWith("..") ? path.join(DIR, file) : rel;
}

const errors = [];
const fail = (where, what) => errors.push(`${where}: ${what}`);

// What deploy/kubernetes/kustomization.yaml uses of kustomize's Kustomization;
// a field added there must be added here, on purpose.
const KUSTOMIZATION_FIELDS = new Set(["apiVersion", "kind", "namespace", "resources", "configMapGenerator"]);
const GENERATOR_FIELDS = new Set(["name", "files"]);

// Every document of FILE as plain values, YAML 1.1; [] after an error.
function parseFile(file) {
  const where = shown(file);
  let text;
  try {
    text = fs.readFileSync(path.join(DIR, file), "utf8");
  } catch (e) {
    fail(where, `cannot read: ${e.message}`);
    return [];
  }
  const docs = YAML.parseAllDocuments(text, { version: "1.1", uniqueKeys: true, prettyErrors: true });
  const values = [];
  for (const doc of docs) {
    for (const problem of [...doc.errors, ...doc.warnings]) {
      // "Map keys must be unique at line 103, column 13:" and the line.
      const head = problem.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
      const pos = problem.linePos?.[0];
      const line = pos ? text.split("\n")[pos.line - 1].trim() : "";
      fail(where, `${pos ? `line ${pos.line}: ` : ""}YAML: ${head}${line ? `: ${line}` : ""}`);
    }
    if (doc.errors.length === 0)
      values.push(doc.toJS());
  }
  return values;
}

const isMap = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// --- kustomization.yaml -----------------------------------------------------

const KFILE = "kustomization.yaml";
const kwhere = shown(KFILE);
const [kust, ...extra] = parseFile(KFILE);
const resources = [];
const generators = [];
if (extra.length)
  fail(kwhere, "more than one YAML document");
if (kust !== undefined && !isMap(kust)) {
  fail(kwhere, "not a mapping");
} else if (kust !== undefined) {
  for (const key of Object.keys(kust))
    if (!KUSTOMIZATION_FIELDS.has(key))
      fail(kwhere, `unknown field '${key}' (known here: ${[...KUSTOMIZATION_FIELDS].join(", ")})`);
  if (kust.apiVersion !== "kustomize.config.k8s.io/v1beta1")
    fail(kwhere, `apiVersion: '${kust.apiVersion}', expected kustomize.config.k8s.io/v1beta1`);
  if (kust.kind !== "Kustomization")
    fail(kwhere, `kind: '${kust.kind}', expected Kustomization`);
  if (typeof kust.namespace !== "string" || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(kust.namespace))
    fail(kwhere, `namespace: '${kust.namespace}' is not a DNS label`);
  if (!Array.isArray(kust.resources)) {
    fail(kwhere, "resources: expected a list of files");
  } else {
    for (const [i, r] of kust.resources.entries()) {
      if (typeof r !== "string" || r.includes("/")) {
        fail(kwhere, `resources[${i}]: '${r}' is not a file of this directory`);
      } else if (!fs.existsSync(path.join(DIR, r)) || !fs.statSync(path.join(DIR, r)).isFile()) {
        fail(kwhere, `resources[${i}]: ${r} does not exist`);
      } else if (resources.includes(r)) {
        fail(kwhere, `resources[${i}]: ${r} listed twice`);
      } else {
        resources.push(r);
      }
    }
  }
  for (const f of fs.readdirSync(DIR).sort())
    if (/\.ya?ml$/.test(f) && f !== KFILE && !(kust.resources ?? []).includes(f))
      fail(kwhere, `${f} is not listed in resources: kubectl apply -k would leave it out`);
  for (const [i, g] of (kust.configMapGenerator ?? []).entries()) {
    const gwhere = `configMapGenerator[${i}]`;
    if (!isMap(g)) {
      fail(kwhere, `${gwhere}: not a mapping`);
      continue;
    }
    for (const key of Object.keys(g))
      if (!GENERATOR_FIELDS.has(key))
        fail(kwhere, `${gwhere}: unknown field '${key}' (known here: ${[...GENERATOR_FIELDS].join(", ")})`);
    if (typeof g.name !== "string" || g.name === "")
      fail(kwhere, `${gwhere}.name: missing`);
    const data = {};
    for (const [j, spec] of (Array.isArray(g.files) ? g.files : []).entries()) {
      // A file is PATH, or KEY=PATH for a key other than its name.
      const [key, file] = String(spec).includes("=") ? String(spec).split(/=(.*)/s) : [path.basename(String(spec)), String(spec)];
      const full = path.join(DIR, file);
      if (!fs.existsSync(full) || !fs.statSync(full).isFile())
        fail(kwhere, `${gwhere}.files[${j}]: ${file} does not exist`);
      else
        data[key] = fs.readFileSync(full, "utf8");
    }
    if (!Array.isArray(g.files) || g.files.length === 0)
      fail(kwhere, `${gwhere}.files: expected a list of files`);
    generators.push({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: g.name }, data });
  }
}

// --- the objects ----------------------------------------------------------

// apps/v1 StatefulSet -> IoK8sApiAppsV1StatefulSet; v1 Service ->
// IoK8sApiCoreV1Service; networking.k8s.io/v1 -> IoK8sApiNetworkingV1...
function schemaName(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
    return null;
  const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);
  const parts = apiVersion.split("/");
  if (parts.length === 1)
    return /^v[0-9a-z]+$/.test(parts[0]) ? `IoK8sApiCore${cap(parts[0])}${kind}` : null;
  const [group, version] = parts;
  if (parts.length !== 2 || !/^[a-z0-9.-]+$/.test(group) || !/^v[0-9a-z]+$/.test(version))
    return null;
  if (group.includes(".") && !group.endsWith(".k8s.io"))
    return null;
  return `IoK8sApi${cap(group.split(".")[0])}${cap(version)}${kind}`;
}

// value, wrapped: every object a Proxy that records into `nodes` the
// properties read of it and whether its keys were enumerated.
function track(value, where, nodes) {
  if (value === null || typeof value !== "object")
    return value;
  const node = { where, value, read: new Set(), enumerated: false };
  nodes.push(node);
  const inner = Array.isArray(value)
    ? value.map((v, i) => track(v, `${where}[${i}]`, nodes))
    : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, track(v, where ? `${where}.${k}` : k, nodes)]));
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (typeof prop === "string")
        node.read.add(prop);
      return Reflect.get(target, prop, receiver);
    },
    has(target, prop) {
      if (typeof prop === "string")
        node.read.add(prop);
      return Reflect.has(target, prop);
    },
    ownKeys(target) {
      node.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

// An ajv error as "spec.replicas: must be integer".
function describe(err) {
  const where = err.instancePath.split("/").slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, s) => (/^[0-9]+$/.test(s) ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), "");
  const p = err.params ?? {};
  let what;
  switch (err.keyword) {
  case "type": what = `must be ${p.type}`; break;
  case "enum": what = `must be one of ${JSON.stringify(p.allowedValues)}`; break;
  case "required": what = `missing required field '${p.missingProperty}'`; break;
  case "format": what = `must be of format ${p.format}`; break;
  default: what = `${err.keyword} ${JSON.stringify(p)}`;
  }
  return `${where || "(the object)"}: ${what}`;
}

const out = [];
const seen = new Map();

async function check(file, object, index) {
  const where = shown(file);
  if (!isMap(object)) {
    fail(where, `document ${index + 1} is not a mapping`);
    return;
  }
  const name = object.metadata?.name;
  const id = `${object.kind}/${name}`;
  if (typeof name !== "string" || name === "")
    fail(where, `${object.kind}: document ${index + 1} has no metadata.name`);
  const key = `${object.apiVersion} ${id}`;
  if (seen.has(key))
    fail(where, `${id}: also in ${seen.get(key)}`);
  seen.set(key, file);
  const schema = schemaName(object.apiVersion, object.kind);
  let validate;
  try {
    if (schema)
      ({ validate } = await import(`kubernetes-models/_schemas/${schema}`));
  } catch {
    validate = undefined;
  }
  if (!validate) {
    fail(where, `${id}: no schema for apiVersion '${object.apiVersion}' kind '${object.kind}'`);
    return;
  }
  const nodes = [];
  if (!validate(track(object, "", nodes)))
    for (const err of validate.errors)
      fail(where, `${id}: ${describe(err)}`);
  for (const node of nodes) {
    if (Array.isArray(node.value) || node.enumerated)
      continue;
    for (const k of Object.keys(node.value))
      if (!node.read.has(k))
        fail(where, `${id}: ${node.where ? `${node.where}.${k}` : k}: unknown field`);
  }
  out.push({ file, object });
}

for (const file of resources) {
  for (const [i, object] of parseFile(file).entries()) {
    if (object === null)
      continue; // an empty document, as kubectl skips it
    await check(file, object, i);
  }
}
for (const [i, cm] of generators.entries())
  await check(KFILE, cm, i);

if (errors.length) {
  for (const e of errors)
    console.error(e);
  console.error(`validate.mjs: ${errors.length} error(s) in ${DIR}`);
  process.exit(1);
}
// The Kustomization first (checked above, by hand), then the objects.
process.stdout.write(JSON.stringify({ file: KFILE, object: kust }) + "\n");
for (const o of out)
  process.stdout.write(JSON.stringify(o) + "\n");
