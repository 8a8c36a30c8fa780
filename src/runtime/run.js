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
//
// And for TypeScript: `node /opt/petri/run.js --typescript FILE` transpiles
// FILE with the typescript module's transpileModule (types stripped, no type
// checking; a syntax error stops it before anything runs), then runs the
// JavaScript as above.  Stacks give the lines and columns of the TypeScript
// (the transpiler's source map).  `--typescript-version` prints the version
// of the typescript module it would use.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');

const typescript = process.argv[2] === '--typescript';
const file = process.argv[typescript ? 3 : 2];
const results = process.env.PETRI_RESULTS || '';
let code = null;	// what runs: the file's, or what the TypeScript became
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

// A module beside the code, so that its own relative imports resolve
// against the working directory as they would for a file there.
const moduleFile = file.replace(/\.[^./]*$/, '') + '.mjs';

function asModule() {
	fs.writeFileSync(moduleFile, code);
	import(require('url').pathToFileURL(moduleFile).href).catch(report);
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

// ---- TypeScript ---------------------------------------------------------

// The typescript module: the working directory's own (its node_modules, as
// require finds it from there), else the system's: Debian's node-typescript,
// npm's global one.
const TYPESCRIPT_DIRS = ['/usr/share/nodejs/typescript', '/usr/lib/node_modules/typescript',
			 '/usr/local/lib/node_modules/typescript'];
const NO_TYPESCRIPT = 'typescript: module not found: install Debian\'s node-typescript ' +
		      '(or `npm install typescript` in the working directory)';
const DIAGNOSTICS_SHOWN = 10;	// syntax errors shown, of one execution
const CONTEXT_MAX = 160;	// characters of the line shown under one

function typescriptDir() {
	try {
		return path.dirname(require.resolve('typescript/package.json',
						    { paths: [process.cwd()] }));
	} catch (err) {
		// none of its own
	}
	return TYPESCRIPT_DIRS.find((d) => fs.existsSync(path.join(d, 'package.json'))) || null;
}

// `--typescript-version`: one line, for GET /v1/languages; none (and exit
// status 1) without the module.
function printTypescriptVersion() {
	const dir = typescriptDir();
	if (!dir) {
		process.stderr.write(NO_TYPESCRIPT + '\n');
		process.exitCode = 1;
		return;
	}
	const { version } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
	process.stdout.write(`TypeScript ${version} (Node.js ${process.version})\n`);
}

// One line of the code under its message, a caret under the column; a
// long line is shown around the column.
function context(line, column) {
	let from = 0;
	if (line.length > CONTEXT_MAX && column > CONTEXT_MAX / 2)
		from = Math.min(column - CONTEXT_MAX / 2, line.length - CONTEXT_MAX);
	const shown = line.slice(from, from + CONTEXT_MAX);
	return '\n    ' + shown + '\n    ' +
	       shown.slice(0, column - from).replace(/[^\t]/g, ' ') + '^';
}

// The transpiler's syntax errors: the execution's error, a SyntaxError whose
// message is the first's place and text (main.ts:2:9: ';' expected.), whose
// traceback is each of them with its line.  Nothing ran.
function syntaxErrors(ts, source, diagnostics) {
	const lines = source.split('\n');
	const name = path.basename(file);
	const shown = diagnostics.slice(0, DIAGNOSTICS_SHOWN).map((d) => {
		const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
		if (!d.file || d.start === undefined)
			return { where: name, text, code: d.code, context: '' };
		const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
		return { where: `${name}:${line + 1}:${character + 1}`, text, code: d.code,
			 context: context((lines[line] || '').replace(/\r$/, ''), character) };
	});
	let traceback = shown.map((d) => `${d.where}: error TS${d.code}: ${d.text}${d.context}`)
		.join('\n');
	if (diagnostics.length > shown.length)
		traceback += `\n... and ${diagnostics.length - shown.length} more`;
	failed = true;
	process.stderr.write(traceback + '\n');
	leave('error.json', JSON.stringify({
		name: 'SyntaxError', message: `${shown[0].where}: ${shown[0].text}`, traceback,
	}));
	process.exitCode = 1;
}

// Where a place of the transpiled code came from: "LINE:COLUMN" of the
// TypeScript (or "LINE" for a line alone), null when the map does not say.
function original(map, line, column) {
	const whole = column === undefined;
	let e = map.findEntry(line - 1, whole ? 0x3fffffff : column - 1);
	let exact = !whole;
	if (e && e.generatedLine !== line - 1) {	// before the line's first mapping
		e = map.findEntry(line - 1, 0x3fffffff);
		exact = false;
	}
	if (!e || e.generatedLine !== line - 1 || e.originalLine === undefined)
		return null;
	if (whole)
		return String(e.originalLine + 1);
	const within = exact ? column - 1 - e.generatedColumn : 0;
	return `${e.originalLine + 1}:${e.originalColumn + 1 + within}`;
}

// Every stack from now on, the code's own (err.stack) as well as the
// execution's error, names the TypeScript's lines and columns: V8's format,
// each place in the transpiled code (the script, or the module's URL)
// mapped back.
function mapStacks(map) {
	const name = path.basename(file);
	const url = require('url').pathToFileURL(moduleFile).href;
	const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
	const places = new RegExp(`(?<![\\w./-])(?:${escape(name)}|${escape(url)}):(\\d+)(?::(\\d+))?`,
				  'g');
	const mapped = (text) => text.replace(places, (all, line, column) => {
		const at = original(map, Number(line), column === undefined ? undefined : Number(column));
		return at ? `${name}:${at}` : all;
	});
	Error.prepareStackTrace = (err, frames) => {
		let head;
		try {
			head = Error.prototype.toString.call(err);
		} catch (e) {
			head = '<error>';
		}
		return mapped(head) + frames.map((f) => '\n    at ' + mapped(String(f))).join('');
	};
}

// The TypeScript as JavaScript (types stripped, enums and namespaces made
// objects, nothing checked), or null when it cannot be: the error is left.
// ES modules are kept as such (import stays import), so that what runs is
// what the same code would be as javascript; an `export {}` the transpiler
// adds to a module whose imports were all types is taken away again.
function transpile(source) {
	const dir = typescriptDir();
	if (!dir) {
		failed = true;
		process.stderr.write(NO_TYPESCRIPT + '\n');
		leave('error.json', JSON.stringify({
			name: 'CommandNotFound', message: NO_TYPESCRIPT, traceback: '',
		}));
		process.exitCode = 127;		// as a shell says a missing command
		return null;
	}
	const ts = require(dir);
	const out = ts.transpileModule(source, {
		fileName: path.basename(file),
		reportDiagnostics: true,
		compilerOptions: {
			target: ts.ScriptTarget.ES2022 || ts.ScriptTarget.ESNext,
			module: ts.ModuleKind.ESNext,
			newLine: ts.NewLineKind.LineFeed,
			sourceMap: true,
		},
	});
	if (out.diagnostics && out.diagnostics.length) {
		syntaxErrors(ts, source, out.diagnostics);
		return null;
	}
	const { SourceMap } = require('module');
	mapStacks(new SourceMap(JSON.parse(out.sourceMapText)));
	return out.outputText.replace(/(^|\n)\/\/# sourceMappingURL=\S*\s*$/, '$1')
		.replace(/(^|\n)export \{\};\n$/, '$1');
}

// ---- the code ------------------------------------------------------------

function run() {
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
}

if (process.argv[2] === '--typescript-version') {
	printTypescriptVersion();
} else {
	try {
		code = fs.readFileSync(file, 'utf8');
		if (typescript)
			code = transpile(code);
	} catch (err) {
		code = null;
		report(err);
	}
	if (code !== null)
		run();
}
