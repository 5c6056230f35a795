// The node kernel of `exec --kernel` (no packages). Started by the
// sandbox's PID 1; fd 3 is its request socket: one JSON line in
// ({"code": ..., "marker": ...}), one JSON line out ({"exit_code": N,
// "result": inspected-or-null}). Output goes to fd 1 and fd 2; after each
// call the marker is written to both, so that the caller knows it has it all.
// Its names are kept in a function: the cells run in the global scope.
(() => {
'use strict';
const vm = require('vm');
const fs = require('fs');
const net = require('net');
const util = require('util');

globalThis.require = require;
globalThis.module = module;
let interrupt = null; // rejects the awaited promise of the current call
process.on('SIGINT', () => { if (interrupt) interrupt(new Error('interrupted (KeyboardInterrupt)')); });

class Exit { constructor(code) { this.code = code; } }

// compile returns a vm.Script for the cell: as is, or, for a top-level
// await, wrapped in an async function whose last line is returned.
function compile(code) {
  try {
    return new vm.Script(code, { filename: '<cell>' });
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
  }
  const lines = code.replace(/\s+$/, '').split('\n');
  const last = lines.pop().replace(/;\s*$/, '');
  const body = lines.join('\n');
  try {
    return new vm.Script(`(async () => {\n${body}\nreturn (${last});\n})()`, { filename: '<cell>', lineOffset: -1 });
  } catch (e) {
    return new vm.Script(`(async () => {\n${code}\n})()`, { filename: '<cell>', lineOffset: -1 });
  }
}

async function call(code) {
  let v = compile(code).runInThisContext({ breakOnSigint: true, displayErrors: false });
  if (v && typeof v.then === 'function') {
    v = await new Promise((resolve, reject) => { interrupt = reject; v.then(resolve, reject); });
  }
  return v === undefined ? null : util.inspect(v);
}

const sock = new net.Socket({ fd: 3, readable: true, writable: true });
let buf = '';
let queue = Promise.resolve();
sock.on('data', (d) => {
  buf += d.toString('utf8');
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    queue = queue.then(() => serve(JSON.parse(line)));
  }
});
sock.on('end', () => process.exit(0));

// describe is an error's stack without the kernel's own frames.
function describe(e) {
  if (!(e && typeof e.stack === 'string')) return util.inspect(e);
  return e.stack.split('\n').filter((l) => !/^\s+at /.test(l) || l.includes('<cell>')).join('\n');
}

async function serve(req) {
  let exitCode = 0, result = null;
  try {
    result = await call(req.code || '');
  } catch (e) {
    exitCode = 1;
    try { process.stderr.write(describe(e) + '\n'); } catch (_) {}
  }
  interrupt = null;
  for (const fd of [1, 2]) { try { fs.writeSync(fd, req.marker || ''); } catch (_) {} }
  sock.write(JSON.stringify({ marker: req.marker || '', exit_code: exitCode, result }) + '\n');
}
})();
