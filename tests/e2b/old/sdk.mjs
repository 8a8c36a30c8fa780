// The oldest code interpreter: @e2b/code-interpreter 2.7.0 on e2b 2.28.0, the
// oldest e2b it accepts (it calls getSandboxDirectUrl, new in e2b 2.28).
export * from '@e2b/code-interpreter';
