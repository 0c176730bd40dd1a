// `npm start`: builds the service into plain JavaScript (server/build-service.mjs), then runs it.
import { stop } from 'esbuild';
import { buildService } from './build-service.mjs';

const main = await buildService();
// esbuild's helper process is not needed again until the chat page's bundles are built, which start it anew.
await stop();
await import(main.href);
