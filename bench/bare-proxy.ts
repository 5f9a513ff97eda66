/**
 * The bench's reference floor: the least a Node gateway does per request (node:http server, parse the JSON
 * body, set the served model, undici Pool.dispatch, relay the response bytes as they come). No auth, limits,
 * metering, model rewrite on the way back, metrics, logs or timeouts: it is not a product, only a yardstick
 * for what the data plane's own work costs on the same machine in the same run.
 *
 * usage: node bench/bare-proxy.ts PORT UPSTREAM_URL SERVED_MODEL [UPSTREAM_CONNECTIONS]
 */
import { createServer } from 'node:http';
import { Pool, type Dispatcher } from 'undici';

const [portArg, upstream, servedModel, connectionsArg] = process.argv.slice(2);
if (portArg === undefined || upstream === undefined || servedModel === undefined) {
  console.error('usage: bare-proxy.ts PORT UPSTREAM_URL SERVED_MODEL');
  process.exit(2);
}
// Upstream connections: 128 unless given (the streaming-capacity case passes its stream count plus a few).
const pool = new Pool(upstream, { connections: connectionsArg === undefined ? 128 : Number(connectionsArg), keepAliveTimeout: 30_000 });

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad JSON"}}');
      return;
    }
    body['model'] = servedModel;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {},
      onResponseStart(_c, status, headers) {
        const ct = headers['content-type'];
        res.writeHead(status, typeof ct === 'string' ? { 'content-type': ct } : {});
      },
      onResponseData(_c, chunk) {
        res.write(chunk);
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      },
    };
    pool.dispatch({ path: req.url ?? '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, handler);
  });
});
server.listen({ port: Number(portArg), host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
