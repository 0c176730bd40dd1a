// Creates a new PGlite data directory (initdb) and exits: run as a child process by openPGlite, because the
// WebAssembly memory initdb uses (about 370 MB) is never returned to the system by a process that goes on
// running. Plain JavaScript: the child starts without the TypeScript loader.
import { PGlite } from '@electric-sql/pglite';

const dataDir = process.argv[2];
if (!dataDir) throw new Error('usage: pglite-initdb.mjs DATA_DIR');
const pglite = await PGlite.create({ dataDir });
await pglite.close();
