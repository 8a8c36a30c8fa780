// The newest pair: @e2b/code-interpreter 2.8.0 on e2b 2.51.0 (the only e2b
// in node_modules, so both share one set of error classes).
export * from '@e2b/code-interpreter';
