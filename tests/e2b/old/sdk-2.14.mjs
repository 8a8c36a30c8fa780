// e2b 2.14.0 alone: the oldest e2b that routes by E2B_SANDBOX_URL. No code
// interpreter release accepts it, so only the base Sandbox (files, commands,
// lifecycle) is tested with it.
export * from 'e2b-2.14';
