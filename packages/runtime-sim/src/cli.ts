#!/usr/bin/env node
// runtime-sim CLI: the only place that reads argv and the environment.
import { CLI_USAGE, parseCliOptions } from './cli-options.ts';
import { createRuntimeSim } from './runtime-sim.ts';

let config;
try {
  config = parseCliOptions(process.argv.slice(2), process.env);
} catch (err) {
  process.stderr.write(`runtime-sim: ${err instanceof Error ? err.message : String(err)}\n${CLI_USAGE}\n`);
  process.exit(2);
}
if (config.help) {
  process.stdout.write(`${CLI_USAGE}\n`);
  process.exit(0);
}

const sim = createRuntimeSim(config.options);
let url: string;
try {
  ({ url } = await sim.listen(config.port, config.host));
} catch (err) {
  // A port taken between a supervisor's check and this listen (pnpm start checks first): one line, no stack.
  const code = (err as NodeJS.ErrnoException).code;
  const why = code === 'EADDRINUSE' ? 'is already in use' : `cannot be used (${code ?? (err instanceof Error ? err.message : String(err))})`;
  process.stderr.write(`runtime-sim: port ${config.port} on ${config.host} ${why}: choose another with --port\n`);
  process.exit(1);
}
process.stdout.write(`runtime-sim listening on ${url} models=${config.options.models.join(',')}\n`);
// A second line marks readiness for supervisors that read stdout rather than poll /health.
void sim.whenWarm().then(() => process.stdout.write(`runtime-sim ready on ${url}\n`));

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`runtime-sim: ${signal}, shutting down\n`);
  sim.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
