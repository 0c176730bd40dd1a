/**
 * The layers, lowest first; a layer imports only from itself and the layers below it (README, "Architecture"):
 *   schema  <-  db  <-  adapters/outbound  <-  routers  <-  adapters/inbound  <-  server
 * and, apart, web/: the browser code of the hosted chat page and the widget loader.
 * Type-only imports count too: a type is a dependency of the code that names it. Tests may import anything;
 * product code never imports a test. `npm run lint:deps` runs this in CI.
 */
const layer = (name, path, below) => ({
  name: `${name}-imports-only-downwards`,
  comment: `${name} may import only from itself and the layers below it`,
  severity: 'error',
  from: { path, pathNot: '\\.test\\.ts$' },
  to: { path: '^(schema|db|adapters|routers|server|test)/', pathNot: `^(${[path.slice(1), ...below].join('|')})` },
});

module.exports = {
  forbidden: [
    layer('schema', '^schema/', []),
    layer('db', '^db/', ['schema/']),
    layer('outbound', '^adapters/outbound/', ['schema/', 'db/']),
    layer('routers', '^routers/', ['schema/', 'db/', 'adapters/outbound/']),
    layer('inbound', '^adapters/inbound/', ['schema/', 'db/', 'adapters/outbound/', 'routers/']),
    {
      name: 'browser-code-stands-alone',
      comment: "web/ runs in the visitor's browser: it imports only web/ and its npm packages, never the service",
      severity: 'error',
      from: { path: '^web/' },
      to: { path: '^(schema|db|adapters|routers|server|test)/' },
    },
    {
      name: 'the-service-never-imports-browser-code',
      comment: 'web/ is bundled for the browser (adapters/inbound/web/build.ts names its entry points as files), never imported',
      severity: 'error',
      from: { path: '^(schema|db|adapters|routers|server)/' },
      to: { path: '^web/' },
    },
    {
      name: 'inbound-adapters-are-independent',
      comment: 'REST, tRPC and GraphQL share only what sits directly in adapters/inbound/ (the one error mapping, the body reader)',
      severity: 'error',
      from: { path: '^adapters/inbound/([^/]+)/' },
      to: { path: '^adapters/inbound/[^/]+/', pathNot: '^adapters/inbound/$1/' },
    },
    {
      name: 'outbound-calls-only-through-the-guarded-client',
      comment:
        'Sockets, HTTP clients and DNS only in the guarded client (the three files of adapters/outbound/http/ that open, pin ' +
        'and check connections), the operator-set DNS resolver (adapters/outbound/dns/resolver.ts), the database driver (db/) ' +
        'and the listener (server/); elsewhere only their pure helpers ' +
        '(isIP, createSecureContext, checkServerIdentity) in the files named here, and types anywhere',
      severity: 'error',
      from: {
        path: '^(routers|adapters|schema)/',
        pathNot:
          '\\.test\\.ts$|^adapters/outbound/http/(guarded-client|pinned-agents|target-check)\\.ts$|^adapters/outbound/dns/resolver\\.ts$|^routers/domains/(certificate-store|served-certificate|hostname)\\.ts$|^adapters/outbound/rate-limit/client-key\\.ts$',
      },
      to: { dependencyTypes: ['core'], dependencyTypesNot: ['type-only'], path: '^(node:)?(http|https|http2|net|tls|dns|dns/promises|dgram)$' },
    },
    {
      name: 'no-http-client-library-outside-the-guarded-client',
      comment: 'An HTTP client library is an unguarded way out: only the guarded client may use one',
      severity: 'error',
      from: { path: '^(routers|adapters|schema|server)/', pathNot: '\\.test\\.ts$|^adapters/outbound/http/' },
      to: { path: 'node_modules/(undici|node-fetch|axios|got|cross-fetch)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-circular',
      comment: 'A cycle means two modules are one; split out what both need',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'product-never-imports-tests',
      severity: 'error',
      from: { pathNot: '^test/|\\.test\\.ts$' },
      to: { path: '^test/|\\.test\\.ts$' },
    },
    {
      name: 'no-unresolvable-imports',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
