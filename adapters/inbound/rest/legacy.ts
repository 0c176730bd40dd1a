/**
 * The spec's versioning map: older unversioned paths served by the v1 procedures, answering with the
 * older flat shape (data fields at the top level beside `success`). Adding a mapping is one line.
 */
export interface LegacyRoute {
  method: string;
  legacyPath: string;
  v1Path: string;
}

export const LEGACY_ROUTES: LegacyRoute[] = [
  { method: 'POST', legacyPath: '/api/knowledge-base/upload', v1Path: '/api/v1/knowledge-base/documents' },
  { method: 'GET', legacyPath: '/api/knowledge-base/documents', v1Path: '/api/v1/knowledge-base/documents' },
  { method: 'POST', legacyPath: '/api/knowledge-base/query', v1Path: '/api/v1/knowledge-base/query' },
  { method: 'GET', legacyPath: '/api/knowledge-base/collections/list', v1Path: '/api/v1/knowledge-base/collections' },
];

export function legacyLookup(table: LegacyRoute[]) {
  const byKey = new Map(table.map((r) => [`${r.method} ${r.legacyPath}`, r.v1Path]));
  return (method: string, path: string) => byKey.get(`${method} ${path}`);
}
