// petri's helper for JavaScript: `node /opt/petri/run.js FILE` runs FILE
// (the code of one execution) as a script in this process's own context,
// the way `node -e` would, and leaves what the driver turns into results in
// $PETRI_RESULTS (docs/languages.md):
//   main.txt    the value of the last expression, as Node's REPL shows it
//               (nothing when it is undefined, or when the code is a module)
//   error.json  {name, message, traceback} of an uncaught exception
// Code with top-level `await` runs in an async function, whose value is that
// of its last expression, as at Node's prompt (`await fetchIt()` shows what
// it resolves to).  Code with `import` cannot be a script: it runs as an ES
// module instead, and has no last value.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');

const file = process.argv[2];
const results = process.env.PETRI_RESULTS || '';
const code = fs.readFileSync(file, 'utf8');
let failed = false;

function leave(name, text) {
	if (!results)
		return;
	try {
		fs.writeFileSync(path.join(results, name), text);
	} catch (e) {
		// the workspace or /tmp is full: the output says enough
	}
}

// The stack as the code sees it: this helper's frames and Node's own that
// called into it are not the code's.
function userStack(err) {
	const lines = String(err.stack).split('\n');
	const end = lines.findIndex((l) => /\(node:vm:|\/opt\/petri\/run\.js:/.test(l));
	return (end > 0 ? lines.slice(0, end) : lines).join('\n');
}

function report(err) {
	if (failed)
		return;
	failed = true;
	const isError = err instanceof Error;
	const stack = isError && typeof err.stack === 'string' ? userStack(err) : util.inspect(err);
	process.stderr.write(stack + '\n');
	leave('error.json', JSON.stringify({
		name: isError && err.name ? String(err.name) : 'Error',
		message: isError ? String(err.message) : util.inspect(err),
		traceback: stack,
	}));
	process.exitCode = 1;
}

process.on('uncaughtException', report);
process.on('unhandledRejection', report);

// What `node -e` gives a script: require from the working directory, and
// the CommonJS names.
const here = path.join(process.cwd(), '[petri]');
globalThis.require = createRequire(here);
globalThis.module = { exports: {}, require: globalThis.require, filename: file };
globalThis.exports = globalThis.module.exports;
globalThis.__filename = file;
globalThis.__dirname = process.cwd();

function show(value) {
	if (value !== undefined)
		leave('main.txt', util.inspect(value, { depth: 4, maxArrayLength: 200 }));
}

function asModule() {
	// A module beside the code, so that its own relative imports resolve
	// against the working directory as they would for a file there.
	const mjs = file.replace(/\.[^./]*$/, '') + '.mjs';
	fs.writeFileSync(mjs, code);
	import(require('url').pathToFileURL(mjs).href).catch(report);
}

// The code in an async function that returns its last expression: the
// code cut before each of its last lines in turn, the rest tried as that
// expression (V8 says whether it is one by compiling it); none: the code as
// the body, without a value.  Line numbers stay those of the code.
const LAST_LINES_TRIED = 64;

function asyncScript() {
	const options = { filename: path.basename(file), lineOffset: -1 };
	const lines = code.split('\n');
	for (let k = lines.length - 1; k >= 0 && k >= lines.length - LAST_LINES_TRIED; k--) {
		const last = lines.slice(k).join('\n').trim().replace(/;+$/, '');
		if (!last)
			continue;
		try {
			return new vm.Script('(async () => {\n' + lines.slice(0, k).join('\n') +
					     '\nreturn (' + last + '\n);\n})()', options);
		} catch (err) {
			// not an expression there: cut one line higher
		}
	}
	return new vm.Script('(async () => {\n' + code + '\n})()', options);
}

let script = null;
try {
	script = new vm.Script(code, { filename: path.basename(file) });
} catch (err) {
	if (!(err instanceof SyntaxError))
		report(err);
	else if (/import|export/.test(String(err.message)))
		asModule();
	else if (/await/.test(String(err.message))) {
		try {
			script = asyncScript();
		} catch (err2) {
			asModule();	// what only a module can be (await in a for of a loop, ...)
		}
	} else
		report(err);
}
if (script) {
	try {
		const value = script.runInThisContext({ displayErrors: false });
		if (value && typeof value.then === 'function')
			value.then(show, report);	// a promise: its value, once it settles
		else
			show(value);
	} catch (err) {
		report(err);
	}
}
